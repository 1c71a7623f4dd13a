package org.tserve.wlm.supervision;

import java.util.function.LongSupplier;

/**
 * When a failed worker starts again: TorchServe's sequence of delays, reset by a lifetime that
 * loaded the model, and a limit on how long one recovery may last (maxRetryTimeoutInSec). A
 * worker that had served for a while and then died starts again at once: that is a crash, not a
 * crash loop, and every second of delay is a second with one worker fewer.
 */
final class RestartBackoff {
    /** Seconds to wait before the n-th restart (TorchServe's sequence). */
    static final int[] SECONDS = {1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597};
    private final LongSupplier millisClock;
    private int retries;
    /** When the current recovery began (0: none under way). */
    private long recoveryStart;
    /** The next start needs no delay (the last lifetime served long enough). */
    private boolean immediate;

    RestartBackoff(LongSupplier millisClock) {
        this.millisClock = millisClock;
    }

    /**
     * The lifetime that just ended had loaded the model: the next failure starts a new recovery,
     * at once when that lifetime had been serving for {@code servedLongEnough}.
     */
    void loaded(boolean servedLongEnough) {
        retries = 0;
        recoveryStart = 0;
        immediate = servedLongEnough;
    }

    /** When the recovery under way began, in clock millis (0 before the first failure). */
    long recoveryStart() {
        return recoveryStart;
    }

    /**
     * Seconds to wait before the next start, or -1 once the recovery has lasted longer than
     * {@code maxRecoverySeconds}: the worker then gives up.
     */
    int nextDelaySeconds(int maxRecoverySeconds) {
        long now = millisClock.getAsLong();
        if (recoveryStart == 0) {
            recoveryStart = now;
        } else if (now - recoveryStart > maxRecoverySeconds * 1000L) {
            return -1;
        }
        if (immediate) {
            immediate = false;
            return 0;
        }
        return SECONDS[Math.min(retries++, SECONDS.length - 1)];
    }
}
