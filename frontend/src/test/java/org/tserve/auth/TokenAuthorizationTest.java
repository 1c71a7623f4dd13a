package org.tserve.auth;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.auth.TokenAuthorization.KeyType;
import org.tserve.auth.TokenAuthorization.Verdict;

public class TokenAuthorizationTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private final AtomicLong now = new AtomicLong(1_000_000);

    private TokenAuthorization auth(Path file) throws Exception {
        TokenAuthorization a = new TokenAuthorization(true, file, 60, new FailureThrottle(), now::get);
        a.init();
        return a;
    }

    private static String key(Path file, String which) throws Exception {
        JsonObject o = JsonParser.parseString(new String(Files.readAllBytes(file), StandardCharsets.UTF_8)).getAsJsonObject();
        return o.getAsJsonObject(which).get("key").getAsString();
    }

    @Test
    public void keysCarryAtLeast128Bits() throws Exception {
        Path f = tmp.getRoot().toPath().resolve("key_file.json");
        auth(f);
        for (String which : new String[] {"management", "inference", "API"}) {
            byte[] raw = Base64.getUrlDecoder().decode(key(f, which));
            assertTrue(which + " key has " + raw.length * 8 + " bits", raw.length * 8 >= 128);
        }
    }

    @Test
    public void repeatedFailuresFromOneAddressAreThrottled() throws Exception {
        Path f = tmp.getRoot().toPath().resolve("key_file.json");
        TokenAuthorization a = auth(f);
        String good = "Bearer " + key(f, "inference");
        assertEquals(Verdict.ALLOWED, a.verify(KeyType.INFERENCE, good, "10.0.0.1"));
        for (int i = 0; i < FailureThrottle.LIMIT; i++) {
            assertEquals(Verdict.DENIED, a.verify(KeyType.INFERENCE, "Bearer wrong" + i, "10.0.0.1"));
        }
        // further failures are throttled, but the right key from the same address still passes
        // (issue 27: one keyless client behind a shared gateway locked everyone out)
        assertEquals(Verdict.THROTTLED, a.verify(KeyType.INFERENCE, "Bearer wrong", "10.0.0.1"));
        assertEquals(Verdict.THROTTLED, a.verify(KeyType.INFERENCE, null, "10.0.0.1"));
        assertEquals(Verdict.ALLOWED, a.verify(KeyType.INFERENCE, good, "10.0.0.1"));
        assertEquals(Verdict.THROTTLED, a.verify(KeyType.MANAGEMENT, good, "10.0.0.1"));
        assertEquals(60, a.retryAfterSeconds("10.0.0.1"));
        assertTrue(TokenAuthorization.throttledMessage("10.0.0.1", 60).contains("10.0.0.1"));
        // another address is not affected
        assertEquals(Verdict.ALLOWED, a.verify(KeyType.INFERENCE, good, "10.0.0.2"));
        // after the window a failure is a plain DENIED again
        now.addAndGet(FailureThrottle.WINDOW_MILLIS);
        assertEquals(Verdict.DENIED, a.verify(KeyType.INFERENCE, "Bearer wrong", "10.0.0.1"));
    }

    @Test
    public void throttleMemoryIsBounded() {
        FailureThrottle t = new FailureThrottle(3, 60_000, 100);
        for (int i = 0; i < 10_000; i++) {
            t.failed("addr" + i, 0);
        }
        assertEquals(100, t.size());
        for (int i = 0; i < 3; i++) {
            t.failed("hot", 0);
        }
        assertTrue(t.retryAfterMillis("hot", 1000) > 0);
    }
}
