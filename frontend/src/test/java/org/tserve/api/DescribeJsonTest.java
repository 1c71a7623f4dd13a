package org.tserve.api;

import static org.junit.Assert.assertEquals;

import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.ModelDescription;

/** Describe's settings fields, in TorchServe's order with tserve's after loadedAtStartup, and derived values. */
public class DescribeJsonTest {
    private static JsonObject describe(ModelSettings s) {
        return DescribeJson.model(new ModelDescription("m", "1.0", "m.mar", "python", true, s, false, List.of(), 7, 0),
                null);
    }

    @Test
    public void fieldsKeepTheirOrder() {
        assertEquals(List.of("modelName", "modelVersion", "modelUrl", "runtime", "minWorkers", "maxWorkers", "batchSize",
                "maxBatchDelay", "dispatchPolicy", "responseTimeout", "startupTimeout", "maxRetryTimeoutInSec",
                "clientTimeoutInMills", "parallelType", "parallelLevel", "deviceType", "continuousBatching",
                "useJobTicket", "useVenv", "stateful", "sequenceMaxIdleMSec", "sequenceTimeoutMSec", "maxNumSequence",
                "maxSequenceJobQueueSize", "loadedAtStartup", "preprocessWorkers", "postprocessInPool",
                "maxBatchesInFlight", "jobQueueSize", "workers", "jobQueueStatus"),
                new ArrayList<>(describe(new ModelSettings()).keySet()));
    }

    @Test
    public void derivedValuesAreShown() {
        ModelSettings s = new ModelSettings();
        s.apply(Map.of("sequenceBatching", true, "sequenceMaxIdleMSec", 10, "batchSize", 2, "maxWorkers", 3,
                "asyncCommunication", true, "deviceIds", List.of(1, 2)), "test", new ArrayList<>());
        JsonObject o = describe(s);
        assertEquals(6, o.get("maxNumSequence").getAsInt());
        assertEquals(1, o.get("maxSequenceJobQueueSize").getAsInt());
        assertEquals(true, o.get("continuousBatching").getAsBoolean());
        assertEquals(true, o.get("stateful").getAsBoolean());
        assertEquals(4, o.get("maxBatchesInFlight").getAsInt());
        assertEquals("[1,2]", o.get("deviceIds").toString());
        assertEquals("\"cpu\"", o.get("deviceType").toString());
        JsonObject plain = describe(new ModelSettings());
        assertEquals(0, plain.get("maxNumSequence").getAsInt());
        assertEquals(0, plain.get("maxSequenceJobQueueSize").getAsInt());
        assertEquals(1, plain.get("maxBatchesInFlight").getAsInt());
    }
}
