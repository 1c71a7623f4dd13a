package org.tserve.grpc;

import java.util.Locale;
import java.util.Set;

/** Turns handler header names into valid gRPC metadata keys (lower case, [0-9a-z-_.]). */
final class TrailerNames {
    /** Names gRPC or HTTP/2 reserve; a handler header with such a name is sent as {@code ts-<name>}. */
    private static final Set<String> RESERVED = Set.of("content-type", "te", "user-agent", "content-length",
        "connection", "host", "transfer-encoding", "trailer", "upgrade", "keep-alive", "proxy-connection");

    private TrailerNames() {
    }

    /** A valid key for {@code name}, or null when nothing usable is left. */
    static String sanitize(String name) {
        if (name == null) {
            return null;
        }
        String n = name.trim().toLowerCase(Locale.ROOT);
        StringBuilder sb = new StringBuilder(n.length());
        for (int i = 0; i < n.length(); i++) {
            char c = n.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
            sb.append(ok ? c : '-');
        }
        String k = sb.toString();
        if (k.isEmpty() || k.endsWith("-bin")) {
            return null;
        }
        if (k.startsWith("grpc-") || k.startsWith(":") || RESERVED.contains(k)) {
            k = "ts-" + k;
        }
        return k;
    }

    /** Metadata ASCII values allow printable ASCII only; others become '?'. */
    static String asciiValue(String v) {
        StringBuilder sb = new StringBuilder(v.length());
        for (int i = 0; i < v.length(); i++) {
            char c = v.charAt(i);
            sb.append(c >= 0x20 && c < 0x7f ? c : '?');
        }
        return sb.toString();
    }
}
