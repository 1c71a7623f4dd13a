package org.tserve.grpc;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ForwardingServerCall;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import org.tserve.util.AccessLog;

/**
 * Attaches a {@link CallContext} to each call and sends its trailers when the call closes, and
 * writes the call's access line as TorchServe's GRPCInterceptor does:
 * {@code /127.0.0.1:53412 "gRPC <service>/<method> HTTP/2.0" <status code> <ms>}.
 */
final class CallContextInterceptor implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        CallContext ctx = new CallContext(headers);
        long start = System.nanoTime();
        ServerCall<Q, R> wrapped = new ForwardingServerCall.SimpleForwardingServerCall<Q, R>(call) {
            @Override
            public void close(Status status, Metadata trailers) {
                trailers.merge(ctx.trailers());
                if (AccessLog.enabled()) {
                    AccessLog.request(AccessLog.client(call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR)), "gRPC",
                            call.getMethodDescriptor().getFullMethodName(), "HTTP/2.0", status.getCode().value(),
                            (System.nanoTime() - start) / 1_000_000, null, null);
                }
                super.close(status, trailers);
            }
        };
        return Contexts.interceptCall(Context.current().withValue(CallContext.KEY, ctx), wrapped, headers, next);
    }
}
