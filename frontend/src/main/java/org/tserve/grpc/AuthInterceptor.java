package org.tserve.grpc;

import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.util.Set;
import org.apache.logging.log4j.Logger;
import org.tserve.auth.TokenAuthorization;
import org.tserve.util.Logging;

/**
 * Token authorization for gRPC: the {@code authorization} metadata key carries
 * {@code Bearer <key>}, the same keys as REST (inference key for the inference service,
 * management key for the management service). A bad or missing token → UNAUTHENTICATED.
 * With {@code health_check_no_auth=true} the health and readiness calls need no token.
 */
final class AuthInterceptor implements ServerInterceptor {
    private static final Logger LOG = Logging.logger(AuthInterceptor.class);
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    /** The probes: TorchServe's Ping and the OIP's ServerLive, ServerReady and ModelReady. */
    static final Set<String> PROBES = Set.of("org.pytorch.serve.grpc.inference.InferenceAPIsService/Ping",
            "org.pytorch.serve.grpc.openinference.GRPCInferenceService/ServerLive",
            "org.pytorch.serve.grpc.openinference.GRPCInferenceService/ServerReady",
            "org.pytorch.serve.grpc.openinference.GRPCInferenceService/ModelReady",
            ServiceAlias.OIP_STANDARD_NAME + "/ServerLive", ServiceAlias.OIP_STANDARD_NAME + "/ServerReady",
            ServiceAlias.OIP_STANDARD_NAME + "/ModelReady");

    private final TokenAuthorization auth;
    private final TokenAuthorization.KeyType type;
    /** Full method names answered without a token. */
    private final Set<String> open;

    AuthInterceptor(TokenAuthorization auth, TokenAuthorization.KeyType type, Set<String> open) {
        this.auth = auth;
        this.type = type;
        this.open = open;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        if (auth == null || !auth.isEnabled() || open.contains(call.getMethodDescriptor().getFullMethodName())) {
            return next.startCall(call, headers);
        }
        String client = TokenAuthorization.clientAddress(call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR));
        TokenAuthorization.Verdict v = auth.verify(type, headers.get(AUTHORIZATION), client);
        if (v == TokenAuthorization.Verdict.ALLOWED) {
            return next.startCall(call, headers);
        }
        LOG.info("gRPC " + call.getMethodDescriptor().getFullMethodName() + ": token authorization failed"
                + (v == TokenAuthorization.Verdict.THROTTLED ? " (throttled)" : ""));
        Status status = v == TokenAuthorization.Verdict.THROTTLED
                ? Status.RESOURCE_EXHAUSTED.withDescription(TokenAuthorization.throttledMessage(client, auth.retryAfterSeconds(client)))
                : Status.UNAUTHENTICATED.withDescription(TokenAuthorization.failureMessage(type));
        call.close(status, new Metadata());
        return new ServerCall.Listener<Q>() {
        };
    }
}
