package org.tserve.auth;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.Base64;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * TorchServe's token authorization: management, inference and API keys written to
 * {@code key_file.json} (mode 0600) in the working directory, checked as
 * {@code Authorization: Bearer <key>}, rotated with {@code /token?type=}.
 */
public final class TokenAuthorization {
    /** Which key an API needs. */
    public enum KeyType { MANAGEMENT, INFERENCE, API }

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

    public TokenAuthorization(boolean enabled, Path file, double expirationMinutes) {
        this.enabled = enabled;
        this.file = file;
        this.expirationMinutes = expirationMinutes;
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
        byte[] b = new byte[6];
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
                return token.equals(managementKey) && now.isBefore(managementExpiry);
            case INFERENCE:
                return token.equals(inferenceKey) && now.isBefore(inferenceExpiry);
            default:
                return token.equals(apiKey);
        }
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
