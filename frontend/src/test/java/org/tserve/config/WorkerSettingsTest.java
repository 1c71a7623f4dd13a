package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/** LOAD's settings come from ModelKeys: every key sent, resolved (aliases folded, effective limits). */
public class WorkerSettingsTest {
    @Test
    public void everyWorkerKeyIsSentUnderItsNameInDeclarationOrder() {
        JsonObject j = WorkerSettings.toJson(new ModelSettings());
        List<String> expected = new ArrayList<>();
        ModelKeys.all().forEach(k -> {
            if (k.forWorker()) {
                expected.add(k.name);
            }
        });
        assertEquals(expected, new ArrayList<>(j.keySet()));
        assertTrue(j.has("continuousBatching") && j.has("sequenceBatching") && j.has("parallelType"));
        assertFalse("the alias is folded into continuousBatching", j.has("asyncCommunication"));
    }

    @Test
    public void theAliasAndDerivedLimitsReachTheWorkerResolved() {
        ModelSettings s = new ModelSettings();
        s.apply(Map.of("asyncCommunication", true, "batchSize", 3, "torchrun", Map.of("nnodes", 2),
                "deviceIds", List.of(1, 2)), "test", new ArrayList<>());
        JsonObject j = WorkerSettings.toJson(s);
        assertTrue(j.get("continuousBatching").getAsBoolean());
        assertEquals(6, j.get("maxBatchesInFlight").getAsInt()); // 2 × batchSize with continuous batching
        assertEquals(3, j.get("maxNumSequence").getAsInt());     // batchSize × max(1, maxWorkers)
        assertEquals(2, j.getAsJsonObject("torchrun").get("nnodes").getAsInt());
        assertEquals("[1,2]", j.get("deviceIds").toString());
    }
}
