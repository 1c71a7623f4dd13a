package org.tserve.grpc;

import io.grpc.Context;
import io.grpc.Metadata;

/**
 * Per-call state shared between the interceptor and the service: the request metadata, and the
 * trailing metadata the service wants sent when the call closes (handler status and headers).
 */
final class CallContext {
    static final Context.Key<CallContext> KEY = Context.key("tserve-call");

    private final Metadata requestHeaders;
    private final Metadata trailers = new Metadata();

    CallContext(Metadata requestHeaders) {
        this.requestHeaders = requestHeaders;
    }

    /** The current call's context, or a detached one outside a call (tests). */
    static CallContext current() {
        CallContext c = KEY.get();
        return c == null ? new CallContext(new Metadata()) : c;
    }

    Metadata requestHeaders() {
        return requestHeaders;
    }

    synchronized void addTrailer(String name, String value) {
        String key = TrailerNames.sanitize(name);
        if (key != null && value != null) {
            trailers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), TrailerNames.asciiValue(value));
        }
    }

    synchronized Metadata trailers() {
        Metadata copy = new Metadata();
        copy.merge(trailers);
        return copy;
    }
}
