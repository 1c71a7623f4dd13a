package org.tserve.wlm.supervision;

import static org.junit.Assert.assertEquals;

import java.util.concurrent.atomic.AtomicLong;
import org.junit.Test;

/** Restart delays: TorchServe's sequence, reset by a good lifetime, bounded by maxRetryTimeoutInSec. */
public class RestartBackoffTest {
    private final AtomicLong now = new AtomicLong(5_000);
    private final RestartBackoff backoff = new RestartBackoff(now::get);

    @Test
    public void followsTheSequenceAndStaysAtItsLastStep() {
        for (int expected : RestartBackoff.SECONDS) {
            assertEquals(expected, backoff.nextDelaySeconds(Integer.MAX_VALUE / 1000));
        }
        int last = RestartBackoff.SECONDS[RestartBackoff.SECONDS.length - 1];
        assertEquals(last, backoff.nextDelaySeconds(Integer.MAX_VALUE / 1000));
    }

    @Test
    public void aLoadedLifetimeStartsANewRecovery() {
        backoff.nextDelaySeconds(300);
        backoff.nextDelaySeconds(300);
        assertEquals(2, backoff.nextDelaySeconds(300));
        assertEquals(5_000, backoff.recoveryStart());
        backoff.loaded(false);
        assertEquals(0, backoff.recoveryStart());
        now.set(9_000);
        assertEquals(1, backoff.nextDelaySeconds(300));
        assertEquals(9_000, backoff.recoveryStart());
    }

    @Test
    public void aWorkerThatServedLongEnoughRestartsAtOnceThenBacksOff() {
        assertEquals(1, backoff.nextDelaySeconds(300));
        backoff.loaded(true);
        assertEquals("a crash after serving: no delay", 0, backoff.nextDelaySeconds(300));
        assertEquals("it failed again before serving: the sequence", 1, backoff.nextDelaySeconds(300));
        assertEquals(1, backoff.nextDelaySeconds(300));
        assertEquals(2, backoff.nextDelaySeconds(300));
        backoff.loaded(false);
        assertEquals("a crash loop keeps its delays", 1, backoff.nextDelaySeconds(300));
    }

    @Test
    public void givesUpOnceTheRecoveryOutlastsItsLimit() {
        assertEquals(1, backoff.nextDelaySeconds(10));
        now.addAndGet(10_000);
        assertEquals("at the limit it still retries", 1, backoff.nextDelaySeconds(10));
        now.addAndGet(1);
        assertEquals(-1, backoff.nextDelaySeconds(10));
    }
}
