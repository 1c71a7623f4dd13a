package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.List;
import org.junit.Test;

public class ModelSnapshotTest {
    private static final String KSERVE = "{\"name\":\"startup.cfg\",\"modelCount\":1,\"models\":{\"mnist\":{\"1.0\":"
            + "{\"defaultVersion\":true,\"marName\":\"mnist.mar\",\"minWorkers\":1,\"maxWorkers\":5,\"batchSize\":1,"
            + "\"maxBatchDelay\":10,\"responseTimeout\":120}}}}";

    @Test
    public void parsesKServesSnapshot() {
        ModelSnapshot s = ModelSnapshot.parse(KSERVE);
        assertEquals("startup.cfg", s.name());
        ModelSnapshot.Version v = s.versions().get(0);
        assertEquals(List.of("mnist", "1.0", "mnist.mar"), List.of(v.model(), v.version(), v.marName()));
        assertTrue(v.isDefault());
        assertEquals(List.of(1, 5, 1, 10, 120), List.of(v.minWorkers(), v.maxWorkers(), v.batchSize(), v.maxBatchDelay(),
                v.responseTimeout()));
        assertNull(v.startupTimeout());
        assertNull(v.runtimeType());
    }

    @Test
    public void roundTripsWhatItWrites() {
        ModelSnapshot s = new ModelSnapshot("x.cfg", List.of(
                new ModelSnapshot.Version("m", "1.0", false, "m.mar", 1, 2, 3, 4, 5, 6, "python"),
                new ModelSnapshot.Version("m", "2.0", true, "m2.mar", 0, 1, 1, 100, 120, 120, "python")));
        String json = s.toJson(42L).toString();
        assertTrue(json, json.contains("\"modelCount\":2") && json.contains("\"created\":42"));
        assertEquals(s.versions(), ModelSnapshot.parse(json).versions());
    }

    @Test
    public void malformedSnapshotsNameTheKey() {
        expect("{", "'model_snapshot' is not valid JSON");
        expect("[]", "must be a JSON object");
        expect("{\"models\":{\"m\":{}}}", "models.m has no versions");
        expect("{\"models\":{\"m\":{\"1.0\":{}}}}", "models.m.1.0 has no \"marName\"");
        expect("{\"models\":{\"m\":{\"1.0\":{\"marName\":\"m.mar\",\"minWorkers\":\"two\"}}}}",
                "models.m.1.0.minWorkers must be an integer, got \"two\"");
        expect("{\"models\":{\"m\":{\"1.0\":{\"marName\":\"m.mar\",\"batchSize\":0}}}}", "models.m.1.0.batchSize must be at least 1");
        expect("{\"models\":{\"m\":{\"1.0\":{\"marName\":\"m.mar\",\"minWorkers\":3,\"maxWorkers\":2}}}}",
                "models.m.1.0.maxWorkers (2) cannot be less than minWorkers (3)");
        expect("{\"models\":{\"m\":{\"1.0\":{\"marName\":\"a.mar\",\"defaultVersion\":true},"
                + "\"2.0\":{\"marName\":\"b.mar\",\"defaultVersion\":true}}}}", "models.m has 2 versions with \"defaultVersion\": true");
        expect("{\"models\":{\"m\":{\"1.0\":{\"marName\":\"a.mar\",\"defaultVersion\":\"yes\"}}}}",
                "models.m.1.0.defaultVersion must be true or false");
        expect("{\"modelCount\":\"one\"}", "modelCount must be an integer");
    }

    private static void expect(String json, String message) {
        try {
            ModelSnapshot.parse(json);
            fail("accepted " + json);
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().startsWith("Configuration key 'model_snapshot'"));
            assertTrue(e.getMessage(), e.getMessage().contains(message));
        }
    }
}
