package org.tserve.wlm.link;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

/** Status and message of a worker's LOADED/ERROR answer. */
public class BackendStatusTest {
    @Test
    public void readsStatusAndMessage() {
        assertEquals(new BackendStatus(507, "out of memory", true),
                BackendStatus.parse("{\"status\": 507, \"message\": \"out of memory\"}"));
    }

    @Test
    public void missingFieldsAndUnreadableAnswersAre500WithTheRawText() {
        assertEquals(new BackendStatus(500, "{}", true), BackendStatus.parse("{}"));
        assertEquals(new BackendStatus(500, "Traceback...", false), BackendStatus.parse("Traceback..."));
    }
}
