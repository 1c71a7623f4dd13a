package org.tserve.server;

/** The server's version (ts/version.txt under model_server_home), set once at startup; "unknown" before. */
public final class ServerVersion {
    private static volatile String version = "unknown";

    private ServerVersion() {
    }

    public static String get() {
        return version;
    }

    public static void set(String v) {
        version = v;
    }
}
