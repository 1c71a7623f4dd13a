package org.tserve.http;

import com.google.gson.JsonObject;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpHeadersFactory;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Handoff;
import org.tserve.util.LogText;
import org.tserve.util.Logging;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;

/**
 * Writes a job's answer as HTTP: a full response for a plain result, or a chunked response for
 * a streaming handler (each CHUNK frame becomes one HTTP chunk, the RESULT the last one). All
 * writes run on the channel's event loop, handed over through {@link Handoff} (one task per event
 * loop for a batch's answers).
 */
final class HttpJobResponder implements JobResponder {
    private static final Logger LOG = Logging.logger(HttpJobResponder.class);
    /** Headers Netty does not validate again: problem() has checked the handler's names and values. */
    private static final DefaultHttpHeadersFactory UNCHECKED_HEADERS =
            DefaultHttpHeadersFactory.headersFactory().withValidation(false);
    private final Exchange ex;
    private boolean streaming;
    private int streamStatus;
    /** The stream is Server-Sent Events (its content type): a late error goes out as one more event. */
    private boolean sse;
    /** Cancels the job if the client's connection closes first (only for cancellable jobs). */
    private ChannelFutureListener cancelOnClose;

    HttpJobResponder(Exchange ex) {
        this.ex = ex;
    }

    /**
     * Cancels {@code job} when the client's connection closes before the answer (continuous
     * batching: the worker frees its sequence). Call on the channel's event loop, after submit.
     */
    void cancelOnClose(Job job) {
        if (job.isCancellable() && !job.isDone()) {
            cancelOnClose = f -> job.cancel();
            ex.ctx.channel().closeFuture().addListener(cancelOnClose);
        }
    }

    /** The answer is being written: a later close must not cancel (and the listener must not pile up). */
    private void answered() {
        if (cancelOnClose != null) {
            ex.ctx.channel().closeFuture().removeListener(cancelOnClose);
            cancelOnClose = null;
        }
    }

    @Override
    public void onChunk(Response chunk) {
        Handoff.execute(ex.ctx.executor(), () -> {
            if (!ex.ctx.channel().isActive() || ex.isFinished()) {
                return;
            }
            if (!streaming && refuseUnsendable(chunk)) {
                return;
            }
            if (!streaming) {
                streaming = true;
                streamStatus = chunk.status() >= 400 ? 200 : chunk.status();
                HttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, status(streamStatus, chunk.message()));
                copyHeaders(chunk, head.headers());
                sse = chunk.contentType().toLowerCase(java.util.Locale.ROOT).startsWith("text/event-stream");
                ex.startChunked(head);
            }
            if (chunk.body().length > 0) {
                ex.ctx.writeAndFlush(new DefaultHttpContent(Unpooled.wrappedBuffer(chunk.body())));
            }
        });
    }

    @Override
    public void onResult(Response r) {
        Handoff.execute(ex.ctx.executor(), () -> {
            answered();
            if (streaming) {
                // on the OpenAI and OIP generate routes the handler shapes its own errors: a body it gives passes through
                boolean shaped = r.status() < 400 || (ex.handlerShapesErrors() && r.body().length > 0);
                LastHttpContent last = shaped
                        ? new DefaultLastHttpContent(Unpooled.wrappedBuffer(r.body()))
                        : new DefaultLastHttpContent(Unpooled.copiedBuffer(errorJson(r.status(), errorText(r)), StandardCharsets.UTF_8));
                ex.finishChunked(streamStatus, last);
                return;
            }
            if (ex.isFinished() || refuseUnsendable(r)) {   // finished: a refused first chunk was answered
                return;
            }
            if (r.status() >= 400 && (r.body().length == 0 || (r.contentType().isEmpty() && !ex.handlerShapesErrors()))) {
                ex.sendError(r.status(), "InternalServerException", errorText(r));
                return;
            }
            FullHttpResponse resp;
            try {
                // not validated again by Netty: problem() checked the handler's names and values
                resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status(r.status(), r.message()),
                        Unpooled.wrappedBuffer(r.body()), UNCHECKED_HEADERS,
                        DefaultHttpHeadersFactory.trailersFactory().withValidation(false));
                copyHeaders(r, resp.headers());
            } catch (RuntimeException e) {   // anything else Netty refuses: still one answer
                unsendable("it was refused: " + e.getMessage());
                return;
            }
            ex.send(resp);
        });
    }

    /**
     * Answers 500 instead when the handler's status line or headers cannot go on the wire (CR,
     * LF or another control character in a header or the reason phrase, a name that is not an
     * HTTP token): Netty would refuse the response and the client would wait forever.
     */
    private boolean refuseUnsendable(Response r) {
        String problem = problem(r);
        if (problem == null) {
            return false;
        }
        unsendable(problem);
        return true;
    }

    private void unsendable(String problem) {
        LOG.warn("Response to " + ex.method + " " + ex.uri + " cannot be sent: " + problem);
        ex.sendError(500, "InternalServerException", "The handler's response cannot be sent: " + problem
                + ". Set header names and values and the reason phrase without line breaks or control characters.");
    }

    /** What makes the response unsendable, or null. */
    static String problem(Response r) {
        if (badValue(r.message())) {
            return "the reason phrase " + LogText.quote(r.message()) + " contains a line break or control character";
        }
        if (badValue(r.contentType())) {
            return "the content type " + LogText.quote(r.contentType()) + " contains a line break or control character";
        }
        for (Header h : r.headers()) {
            if (!isToken(h.name())) {
                return "header name " + LogText.quote(h.name()) + " is not a valid HTTP header name";
            }
            if (badValue(h.value())) {
                return "header " + LogText.quote(h.name()) + " has a value with a line break or control character";
            }
        }
        return null;
    }

    private static boolean badValue(String v) {
        for (int i = 0; i < v.length(); i++) {
            char c = v.charAt(i);
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                return true;
            }
        }
        return false;
    }

    /** RFC 7230 token: the characters a header name may have. */
    private static boolean isToken(String n) {
        if (n.isEmpty()) {
            return false;
        }
        for (int i = 0; i < n.length(); i++) {
            char c = n.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    @Override
    public void onError(int status, String message) {
        Handoff.execute(ex.ctx.executor(), () -> {
            answered();
            if (streaming) {
                ex.finishChunked(status, new DefaultLastHttpContent(
                        Unpooled.copiedBuffer(errorJson(status, message), StandardCharsets.UTF_8)));
                return;
            }
            ex.sendError(status, HttpError.typeFor(status), message);
        });
    }

    private static String errorText(Response r) {
        if (!r.message().isEmpty()) {
            return r.message();
        }
        String body = new String(r.body(), StandardCharsets.UTF_8);
        return body.isEmpty() ? "Prediction failed with status " + r.status() : body;
    }

    /** The last chunk of a stream that failed: TorchServe's error json, OpenAI's or OIP's (an SSE event in an SSE stream). */
    private String errorJson(int status, String message) {
        if (ex.openAiErrors()) {
            OpenAiError e = OpenAiError.of(status, message);
            return sse ? e.sseEvent() : e.compactJson() + "\n";
        }
        JsonObject o = new JsonObject();
        if (ex.oipErrors()) {
            o.addProperty("error", message);
            String json = Exchange.GSON.toJson(o);
            return sse ? "data: " + json + "\n\n" : json + "\n";
        }
        o.addProperty("code", status);
        o.addProperty("type", HttpError.typeFor(status));
        o.addProperty("message", message);
        return Exchange.GSON.toJson(o) + "\n";
    }

    private static HttpResponseStatus status(int code, String reason) {
        if (code < 100 || code > 999) {
            return HttpResponseStatus.INTERNAL_SERVER_ERROR;
        }
        return reason == null || reason.isEmpty() ? HttpResponseStatus.valueOf(code) : new HttpResponseStatus(code, reason);
    }

    private static void copyHeaders(Response r, HttpHeaders h) {
        if (!r.contentType().isEmpty()) {
            h.set(HttpHeaderNames.CONTENT_TYPE, r.contentType());
        }
        for (Header x : r.headers()) {
            String n = x.name();
            if (n.equalsIgnoreCase("content-length") || n.equalsIgnoreCase("transfer-encoding")
                    || n.equalsIgnoreCase("connection")) {
                continue;
            }
            h.add(n, x.value());
        }
    }
}
