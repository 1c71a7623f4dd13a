package org.tserve.grpc;

import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.util.logging.Logger;
import org.tserve.auth.TokenAuthorization;

/**
 * Token authorization for gRPC: the {@code authorization} metadata key carries
 * {@code Bearer <key>}, the same keys as REST (inference key for the inference service,
 * management key for the management service). A bad or missing token → UNAUTHENTICATED.
 */
final class AuthInterceptor implements ServerInterceptor {
    private static final Logger LOG = Logger.getLogger(AuthInterceptor.class.getName());
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    private final TokenAuthorization auth;
    private final TokenAuthorization.KeyType type;

    AuthInterceptor(TokenAuthorization auth, TokenAuthorization.KeyType type) {
        this.auth = auth;
        this.type = type;
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        if (auth == null || !auth.isEnabled() || auth.check(type, headers.get(AUTHORIZATION))) {
            return next.startCall(call, headers);
        }
        LOG.info("gRPC " + call.getMethodDescriptor().getFullMethodName() + ": token authorization failed");
        call.close(Status.UNAUTHENTICATED.withDescription(TokenAuthorization.failureMessage(type)), new Metadata());
        return new ServerCall.Listener<Q>() {
        };
    }
}
