package org.tserve.grpc;

import com.google.protobuf.ByteString;
import io.grpc.Metadata;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.pytorch.serve.grpc.inference.PredictionsRequest;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Part;

/**
 * A {@link PredictionsRequest} → a workload-manager {@link Job}: each {@code input} entry is one
 * part (name = key, raw bytes, no content type, as in TorchServe); the call's ASCII metadata is
 * forwarded as request headers (except the token and gRPC's own keys) so handlers can read them.
 */
final class JobFactory {
    private static final Set<String> NOT_FORWARDED = Set.of("authorization", "content-type", "te", "user-agent",
        "accept-encoding");

    private JobFactory() {
    }

    static Job create(PredictionsRequest req, Metadata metadata, List<Header> extraHeaders, JobResponder responder) {
        List<Header> headers = new ArrayList<>();
        for (String key : metadata.keys()) {
            String k = key.toLowerCase(Locale.ROOT);
            if (k.endsWith(Metadata.BINARY_HEADER_SUFFIX) || k.startsWith("grpc-") || k.startsWith(":")
                    || NOT_FORWARDED.contains(k)) {
                continue;
            }
            for (String v : metadata.getAll(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER))) {
                headers.add(new Header(key, v));
            }
        }
        headers.addAll(extraHeaders);
        List<Part> parts = new ArrayList<>();
        for (Map.Entry<String, ByteString> e : req.getInputMap().entrySet()) {
            parts.add(new Part(e.getKey(), "", e.getValue().toByteArray()));
        }
        String version = req.getModelVersion().isEmpty() ? null : req.getModelVersion();
        return new Job(req.getModelName(), version, headers, parts, responder);
    }
}
