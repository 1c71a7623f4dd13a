package org.tserve.grpc;

import io.grpc.MethodDescriptor;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;

/**
 * One service implementation served under a second gRPC service name: the same methods, messages
 * and handlers, with the method names rewritten. The Open Inference Protocol's service is
 * {@code org.pytorch.serve.grpc.openinference.GRPCInferenceService} in TorchServe's proto and
 * {@code inference.GRPCInferenceService} in KServe's and Triton's, which tritonclient and KServe's
 * InferenceGRPCClient call; the messages are wire-compatible, so tserve answers both names.
 */
final class ServiceAlias {
    /** The Open Inference Protocol service name of KServe's and Triton's grpc_predict_v2.proto. */
    static final String OIP_STANDARD_NAME = "inference.GRPCInferenceService";

    private ServiceAlias() {
    }

    /** {@code service} (already intercepted) also under {@code name}. */
    static ServerServiceDefinition as(String name, ServerServiceDefinition service) {
        ServerServiceDefinition.Builder b = ServerServiceDefinition.builder(name);
        for (ServerMethodDefinition<?, ?> m : service.getMethods()) {
            b.addMethod(renamed(name, m));
        }
        return b.build();   // checks that every method belongs to the one service
    }

    private static <Q, R> ServerMethodDefinition<Q, R> renamed(String service, ServerMethodDefinition<Q, R> m) {
        MethodDescriptor<Q, R> d = m.getMethodDescriptor();
        MethodDescriptor<Q, R> alias = d.toBuilder()
                .setFullMethodName(MethodDescriptor.generateFullMethodName(service, d.getBareMethodName()))
                .build();
        return ServerMethodDefinition.create(alias, m.getServerCallHandler());
    }
}
