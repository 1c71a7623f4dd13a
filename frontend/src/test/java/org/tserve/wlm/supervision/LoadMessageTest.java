package org.tserve.wlm.supervision;

import static org.junit.Assert.assertEquals;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Map;
import org.junit.Test;
import org.tserve.config.ModelSettings;

/** LOAD as the frontend writes it: the worker's own fields, then the model's settings from ModelKeys. */
public class LoadMessageTest {
    private static final WorkerEnvironment ENV = new WorkerEnvironment("python3", Paths.get("/tmp"), "/srv", null,
            false, false, "", true, "");

    @Test
    public void theDeviceTypeIsTheWorkersNotTheOneAskedFor() {
        ModelSettings s = new ModelSettings();
        s.apply(Map.of("deviceType", "gpu"), "test", new ArrayList<>());
        assertEquals("cpu", LoadMessage.json("m", "1.0", "/srv/m", "h.py", "W-1", -1, ENV, s).get("deviceType").getAsString());
        assertEquals("gpu", LoadMessage.json("m", "1.0", "/srv/m", "h.py", "W-1", 0, ENV, s).get("deviceType").getAsString());
    }

    /** The shared vector "LOAD with every documented key" has exactly the keys the frontend sends, in its order. */
    @Test
    public void theLoadVectorHoldsEveryKeyTheFrontendSends() throws Exception {
        File vector = new File(System.getProperty("tserve.repo", "../"), "test/protocol_vectors/load.json");
        JsonObject meaning = JsonParser.parseString(new String(Files.readAllBytes(vector.toPath()), StandardCharsets.UTF_8))
                .getAsJsonObject();
        JsonObject sent = LoadMessage.json("m", "1.0", "/srv/m", "h.py", "W-1", -1, ENV, new ModelSettings());
        assertEquals("test/protocol_vectors/load.json is out of date: add the key to generate.py and run it",
                new ArrayList<>(sent.keySet()), new ArrayList<>(meaning.getAsJsonObject("json").keySet()));
    }
}
