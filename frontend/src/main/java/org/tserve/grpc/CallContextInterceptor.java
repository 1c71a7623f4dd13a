package org.tserve.grpc;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;

/** Attaches a {@link CallContext} to each call and sends its trailers when the call closes. */
final class CallContextInterceptor implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        CallContext ctx = new CallContext(headers);
        ServerCall<Q, R> wrapped = new ForwardingServerCall.SimpleForwardingServerCall<Q, R>(call) {
            @Override
            public void close(Status status, Metadata trailers) {
                trailers.merge(ctx.trailers());
                super.close(status, trailers);
            }
        };
        return Contexts.interceptCall(Context.current().withValue(CallContext.KEY, ctx), wrapped, headers, next);
    }
}
