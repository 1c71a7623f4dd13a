package org.tserve.auth;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.Base64;
import java.util.Locale;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * TorchServe's token authorization: management, inference and API keys written to
 * {@code key_file.json} (mode 0600) in the working directory, checked as
 * {@code Authorization: Bearer <key>}, rotated with {@code /token?type=}. Keys carry 128 random
 * bits (TorchServe: 48) and are compared in constant time. Once an address has failed
 * {@value FailureThrottle#LIMIT} checks within a minute, its further failures that minute are
 * answered "throttled" (HTTP 429 after a delay, gRPC RESOURCE_EXHAUSTED) while the right key from
 * it still passes: behind a shared gateway or NAT, one client without a key locks nobody out.
 */
public final class TokenAuthorization {
    /** Which key an API needs. */
    public enum KeyType { MANAGEMENT, INFERENCE, API }

    /** The outcome of {@link #verify}. */
    public enum Verdict { ALLOWED, DENIED, THROTTLED }

    /** Random bytes per key: 128 bits, 22 URL-safe base64 characters. */
    static final int KEY_BYTES = 16;

    private static final Pattern BEARER = Pattern.compile("^Bearer\\s+(\\S+)$");
    private final boolean enabled;
    private final Path file;
    private final double expirationMinutes;
    private final SecureRandom random = new SecureRandom();
    private String managementKey;
    private String inferenceKey;
    private String apiKey;
    private Instant managementExpiry;
    private Instant inferenceExpiry;
    private final FailureThrottle throttle;
    private final LongSupplier clock;

    public TokenAuthorization(boolean enabled, Path file, double expirationMinutes) {
        this(enabled, file, expirationMinutes, new FailureThrottle(), System::currentTimeMillis);
    }

    TokenAuthorization(boolean enabled, Path file, double expirationMinutes, FailureThrottle throttle, LongSupplier clock) {
        this.enabled = enabled;
        this.file = file;
        this.expirationMinutes = expirationMinutes;
        this.throttle = throttle;
        this.clock = clock;
    }

    public boolean isEnabled() {
        return enabled;
    }

    /** Generates all keys and writes the key file (no-op when disabled). */
    public synchronized void init() throws IOException {
        if (!enabled) {
            return;
        }
        managementKey = newKey();
        inferenceKey = newKey();
        apiKey = newKey();
        managementExpiry = expiry();
        inferenceExpiry = expiry();
        write();
    }

    private String newKey() {
        byte[] b = new byte[KEY_BYTES];
        random.nextBytes(b);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(b);
    }

    private Instant expiry() {
        return Instant.now().plusMillis((long) (expirationMinutes * 60000));
    }

    private void write() throws IOException {
        JsonObject root = new JsonObject();
        JsonObject m = new JsonObject();
        m.addProperty("key", managementKey);
        m.addProperty("expiration time", managementExpiry.toString());
        JsonObject i = new JsonObject();
        i.addProperty("key", inferenceKey);
        i.addProperty("expiration time", inferenceExpiry.toString());
        JsonObject a = new JsonObject();
        a.addProperty("key", apiKey);
        root.add("management", m);
        root.add("inference", i);
        root.add("API", a);
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Files.deleteIfExists(tmp);
        Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.write(tmp, new GsonBuilder().setPrettyPrinting().create().toJson(root).getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** True when auth is off or the Authorization header carries the valid, unexpired key. */
    public synchronized boolean check(KeyType type, String authorizationHeader) {
        if (!enabled) {
            return true;
        }
        if (authorizationHeader == null) {
            return false;
        }
        Matcher mt = BEARER.matcher(authorizationHeader.trim());
        if (!mt.matches()) {
            return false;
        }
        String token = mt.group(1);
        Instant now = Instant.now();
        switch (type) {
            case MANAGEMENT:
                return same(token, managementKey) && now.isBefore(managementExpiry);
            case INFERENCE:
                return same(token, inferenceKey) && now.isBefore(inferenceExpiry);
            default:
                return same(token, apiKey);
        }
    }

    /** Constant-time comparison (the time does not depend on where the strings differ). */
    private static boolean same(String token, String key) {
        return key != null && MessageDigest.isEqual(token.getBytes(StandardCharsets.UTF_8), key.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * {@link #check} for a request from {@code client} (an address): the right key always passes;
     * a failure is counted, and is THROTTLED instead of DENIED once the address has too many
     * recent failures (the throttle is on the failures, never on the address's valid requests).
     */
    public synchronized Verdict verify(KeyType type, String authorizationHeader, String client) {
        if (!enabled || check(type, authorizationHeader)) {
            return Verdict.ALLOWED;
        }
        long now = clock.getAsLong();
        if (throttle.retryAfterMillis(client, now) > 0) {
            return Verdict.THROTTLED;
        }
        throttle.failed(client, now);
        return Verdict.DENIED;
    }

    /** Seconds until a throttled {@code client} may try again (at least 1). */
    public synchronized long retryAfterSeconds(String client) {
        return Math.max(1, (throttle.retryAfterMillis(client, clock.getAsLong()) + 999) / 1000);
    }

    /** The client's IP address (without the port), the unit token failures are counted in. */
    public static String clientAddress(SocketAddress a) {
        if (a instanceof InetSocketAddress && ((InetSocketAddress) a).getAddress() != null) {
            return ((InetSocketAddress) a).getAddress().getHostAddress();
        }
        return String.valueOf(a);
    }

    /** The message for a throttled client. */
    public static String throttledMessage(String client, long retryAfterSeconds) {
        return "Too many failed token checks from " + client + " (" + FailureThrottle.LIMIT + " within a minute): "
                + "failed checks from this address are answered 429 for " + retryAfterSeconds + " s; requests "
                + "with the right key still pass";
    }

    /** The message for a failed check, naming the key the API needs. */
    public static String failureMessage(KeyType type) {
        String which = type == KeyType.API ? "API" : type.name().toLowerCase(Locale.ROOT);
        return "Token Authorization failed. Token either incorrect, expired, or not provided correctly: this API needs "
                + "the '" + which + "' key from key_file.json as 'Authorization: Bearer <key>'";
    }

    /** Regenerates the management or inference key; returns false for any other type. */
    public synchronized boolean rotate(String type) throws IOException {
        if ("management".equals(type)) {
            managementKey = newKey();
            managementExpiry = expiry();
        } else if ("inference".equals(type)) {
            inferenceKey = newKey();
            inferenceExpiry = expiry();
        } else {
            return false;
        }
        write();
        return true;
    }

    public Path getFile() {
        return file;
    }
}
