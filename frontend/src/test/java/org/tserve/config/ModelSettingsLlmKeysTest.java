package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/** The continuous-batching and stateful-sequence keys: parsed, derived limits, refusals naming the key. */
public class ModelSettingsLlmKeysTest {
    /** Settings with {@code yaml} applied as model-config.yaml, which must raise no warning. */
    static ModelSettings apply(Map<String, Object> yaml) {
        ModelSettings s = new ModelSettings();
        List<String> warnings = new ArrayList<>();
        s.apply(yaml, "model-config.yaml", warnings);
        assertEquals(List.of(), warnings);
        return s;
    }

    @Test
    public void continuousBatchingKeepsTwoSlotsPerSequenceInFlight() {
        ModelSettings s = apply(Map.of("continuousBatching", true, "batchSize", 8));
        assertTrue(s.joinsRunningBatch());
        assertEquals(16, s.inFlightLimit());
        assertTrue(apply(Map.of("asyncCommunication", true)).joinsRunningBatch());
        assertEquals(3, apply(Map.of("continuousBatching", true, "maxBatchesInFlight", 3)).inFlightLimit());
        assertFalse(apply(Map.of("batchSize", 8)).joinsRunningBatch());
    }

    @Test
    public void sequenceKeysAreReadAndTheLimitIsDerived() {
        ModelSettings s = apply(Map.of("sequenceBatching", true, "sequenceMaxIdleMSec", 500, "batchSize", 4,
                "maxWorkers", 3, "maxSequenceJobQueueSize", 2));
        s.checkSequences("m");
        assertEquals(12, s.sequenceLimit());
        assertEquals(2, s.copy().maxSequenceJobQueueSize);
        assertEquals(7, apply(Map.of("maxNumSequence", 7)).sequenceLimit());
    }

    @Test
    public void sequenceBatchingNeedsAnIdleLimitAndWorksWithContinuousBatching() {
        expectRefusal(apply(Map.of("sequenceBatching", true)), "sequenceMaxIdleMSec");
        ModelSettings both = apply(Map.of("sequenceBatching", true, "sequenceMaxIdleMSec", 100,
                "continuousBatching", true, "batchSize", 4));
        both.checkSequences("m");   // TorchServe's SequenceContinuousBatching
        assertTrue(both.joinsRunningBatch());
        assertEquals(4, both.sequenceLimit());
        try {
            apply(Map.of("sequenceBatching", "yes"));
            fail("a non-boolean must be refused");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("'sequenceBatching' must be true or false"));
        }
    }

    private static void expectRefusal(ModelSettings s, String key) {
        try {
            s.checkSequences("m");
            fail("refusal naming " + key + " expected");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(key));
        }
    }
}
