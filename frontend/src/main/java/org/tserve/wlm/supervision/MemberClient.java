package org.tserve.wlm.supervision;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The leader's client of one member node: the member's {@code /cluster/workers} API on its
 * management address (docs/distributed.md, "Across machines"). Every failure is a
 * {@link MemberException} whose message names the member.
 */
public final class MemberClient {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    /** The member as configured ({@code host:port}), for messages. */
    public final String address;
    private final URI base;
    private final String key;

    public MemberClient(String address, String key) {
        this.address = address;
        String a = address.contains("://") ? address : "http://" + address;
        this.base = URI.create(a.endsWith("/") ? a.substring(0, a.length() - 1) : a);
        this.key = key;
    }

    /** The members of {@code cluster_members} (comma or space separated), in node-rank order 1, 2, ... */
    public static List<MemberClient> parse(String members, String key) {
        List<MemberClient> out = new ArrayList<>();
        if (members != null) {
            for (String m : members.split("[,\\s]+")) {
                if (!m.isEmpty()) {
                    out.add(new MemberClient(m, key));
                }
            }
        }
        return out;
    }

    /** A failure talking to a member: {@code status} is the member's answer, or 502 when it did not answer. */
    public static final class MemberException extends Exception {
        private static final long serialVersionUID = 1L;
        public final int status;

        public MemberException(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    /** Starts this member's part of a job; returns the member's state of it. */
    public JsonObject start(JsonObject spec, Duration timeout) throws MemberException {
        return call("POST", "/cluster/workers", spec.toString(), timeout);
    }

    /** The member's state of job {@code id}. */
    public JsonObject state(String id, Duration timeout) throws MemberException {
        return call("GET", "/cluster/workers/" + id, null, timeout);
    }

    /** Stops job {@code id} on the member and waits for its ranks to exit. */
    public JsonObject stop(String id, Duration timeout) throws MemberException {
        return call("DELETE", "/cluster/workers/" + id, null, timeout);
    }

    private JsonObject call(String method, String path, String body, Duration timeout) throws MemberException {
        HttpRequest.Builder b = HttpRequest.newBuilder(base.resolve(path)).timeout(timeout)
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
        if (body != null) {
            b.header("Content-Type", "application/json");
        }
        if (key != null && !key.isEmpty()) {
            b.header("Authorization", "Bearer " + key);
        }
        HttpResponse<String> r;
        try {
            r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new MemberException(502, "member " + address + " is unreachable: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new MemberException(503, "interrupted while calling member " + address);
        }
        JsonObject o;
        try {
            o = JsonParser.parseString(r.body()).getAsJsonObject();
        } catch (RuntimeException e) {
            o = new JsonObject();
            o.addProperty("message", r.body());
        }
        if (r.statusCode() != 200) {
            String msg = o.has("message") ? o.get("message").getAsString() : r.body();
            throw new MemberException(r.statusCode(), "member " + address + " answered " + r.statusCode() + ": " + msg);
        }
        return o;
    }
}
