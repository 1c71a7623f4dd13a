package org.tserve.wlm.registry;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.file.Path;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.archive.ModelArchive;
import org.tserve.wlm.TestModels;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.WlmException;

/** Which of request, manifest and configuration names a new model version, and what is refused. */
public class ModelFactoryTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private Path dir() {
        return tmp.getRoot().toPath();
    }

    private ModelArchive archive(String modelJson) throws Exception {
        return TestModels.archive(dir(), "model", "{\"runtime\": \"python\", \"model\": {" + modelJson + "}}", "model.mar");
    }

    private Model create(String properties, RegisterRequest req, String modelJson) throws Exception {
        return new ModelFactory(TestModels.config(dir(), properties)).create(req, archive(modelJson));
    }

    private int refusal(String properties, RegisterRequest req, String modelJson) throws Exception {
        try {
            create(properties, req, modelJson);
        } catch (WlmException e) {
            return e.getStatus();
        }
        fail("expected a refusal");
        return 0;
    }

    @Test
    public void theRequestWinsOverTheManifest() throws Exception {
        RegisterRequest req = new RegisterRequest("model.mar");
        req.modelName = "fromRequest";
        req.handler = "r.py";
        Model m = create("", req, "\"modelName\": \"fromManifest\", \"handler\": \"m.py\", \"modelVersion\": \"3\"");
        assertEquals("fromRequest", m.name);
        assertEquals("r.py", m.handler);
        assertEquals("3", m.version);
        Model plain = create("", new RegisterRequest("model.mar"), "\"modelName\": \"fromManifest\", \"handler\": \"m.py\"");
        assertEquals("fromManifest", plain.name);
        assertEquals("m.py", plain.handler);
    }

    @Test
    public void withoutANameTheArchiveFileNameIsUsedAndTheVersionIs1() throws Exception {
        Model m = create("", new RegisterRequest("/store/resnet-18.tar.gz"), "\"handler\": \"h.py\"");
        assertEquals("resnet-18", m.name);
        assertEquals("1.0", m.version);
    }

    @Test
    public void badNamesAndRuntimesAre400() throws Exception {
        RegisterRequest badName = new RegisterRequest("model.mar");
        badName.modelName = "-x";
        assertEquals(400, refusal("", badName, "\"handler\": \"h.py\""));
        RegisterRequest badRuntime = new RegisterRequest("model.mar");
        badRuntime.runtime = "java";
        assertEquals(400, refusal("", badRuntime, "\"modelName\": \"m\", \"handler\": \"h.py\""));
    }

    @Test
    public void theHandlerFallsBackToDefaultServiceHandlerElseIs400() throws Exception {
        assertEquals(400, refusal("", new RegisterRequest("model.mar"), "\"modelName\": \"m\""));
        Model m = create("default_service_handler=image_classifier\n", new RegisterRequest("model.mar"),
                "\"modelName\": \"m\"");
        assertEquals("image_classifier", m.handler);
    }

    @Test
    public void startupModelsGetAWorkerPerGpuWhenNothingElseSays() throws Exception {
        RegisterRequest startup = new RegisterRequest("model.mar");
        startup.loadedAtStartup = true;
        Model m = create("number_of_gpu=3\n", startup, "\"modelName\": \"m\", \"handler\": \"h.py\"");
        assertEquals(3, m.getSettings().minWorkers);
        assertTrue(m.loadedAtStartup);
        Model api = create("number_of_gpu=3\n", new RegisterRequest("model.mar"), "\"modelName\": \"m\", \"handler\": \"h.py\"");
        assertEquals("registered through the API: default_workers_per_model (0)", 0, api.getSettings().minWorkers);
    }
}
