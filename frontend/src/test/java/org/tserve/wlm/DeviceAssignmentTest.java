package org.tserve.wlm;

import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerDescription;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.supervision.ProcessTree;
import org.tserve.wlm.supervision.WorkerEnvironment;

/**
 * The server's DeviceAllocator behind register and scale: a {@code custom} worker with
 * parallelLevel 2 holds two of the (configured) four GPUs, gets exactly them as
 * CUDA_VISIBLE_DEVICES, gives them back when it stops, and a worker that does not fit is
 * refused with the numbers. The backend is {@link FakeWorker} (no Python, no GPU needed).
 */
public class DeviceAssignmentTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private ModelManager models;
    private Path root;

    private Path model(String name, String yaml) throws Exception {
        Path model = root.resolve(name);
        Files.createDirectories(model.resolve("MAR-INF"));
        Files.write(model.resolve("MAR-INF/MANIFEST.json"), ("{\"runtime\": \"python\", \"model\": {\"modelName\": \"" + name
                + "\", \"handler\": \"h.py\", \"modelVersion\": \"1.0\", \"configFile\": \"model-config.yaml\"}}")
                .getBytes(StandardCharsets.UTF_8));
        Files.write(model.resolve("model-config.yaml"), yaml.getBytes(StandardCharsets.UTF_8));
        return model;
    }

    private void server(int gpus) throws Exception {
        root = tmp.getRoot().toPath();
        String cp = new File(FakeWorker.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath()
                + File.pathSeparator
                + new File(Job.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath();
        String java = ProcessHandle.current().info().command().orElse("java");
        Path python = root.resolve("fake-python");
        Files.write(python, ("#!/bin/sh\nshift 2\nexec '" + java + "' -Xshare:auto -XX:TieredStopAtLevel=1 -cp '" + cp
                + "' org.tserve.wlm.FakeWorker pipeline \"$@\"\n").getBytes(StandardCharsets.UTF_8));
        Files.setPosixFilePermissions(python, PosixFilePermissions.fromString("rwx------"));
        Path props = root.resolve("config.properties");
        Files.write(props, ("model_store=" + root + "\nnumber_of_gpu=" + gpus + "\nunregister_model_timeout=30\n")
                .getBytes(StandardCharsets.UTF_8));
        ConfigManager cfg = new ConfigManager(Arguments.parse(new String[] {"-f", props.toString()}), new HashMap<>());
        Path sockets = Files.createDirectories(root.resolve("sock"));
        WorkerEnvironment env = new WorkerEnvironment(python.toString(), sockets, root.toString(), null, true, false, "",
                true, "");
        models = new ModelManager(cfg, env, root);
    }

    private StatusResult register(Path model, int workers) throws WlmException {
        RegisterRequest r = new RegisterRequest(model.toString());
        r.initialWorkers = workers;
        return models.register(r);
    }

    /** Each worker's devices as describe shows them, and checked against its process's environment. */
    private List<String> devices(String name) throws WlmException {
        List<String> out = new ArrayList<>();
        for (WorkerDescription w : models.describe(name, null).get(0).workers()) {
            assertEquals(1, w.ranks().size());
            String devices = w.ranks().get(0).devices();
            assertEquals("CUDA_VISIBLE_DEVICES of worker " + w.id(), devices,
                    ProcessTree.environ(w.pid()).get("CUDA_VISIBLE_DEVICES"));
            out.add(devices);
        }
        out.sort(null);
        return out;
    }

    @After
    public void stop() {
        if (models != null) {
            models.shutdown();
        }
    }

    @Test
    public void workersFitThenARefusalNamesTheNumbersAndStoppingFreesTheDevices() throws Exception {
        server(4);
        Path m = model("c", "parallelType: custom\nparallelLevel: 2\ndeviceType: gpu\nmaxWorkers: 4\n");
        assertEquals(200, register(m, 2).status());
        assertEquals(List.of("0,1", "2,3"), devices("c"));
        try {
            models.scale("c", null, 3, 3, true);
            fail("a third worker of 2 devices does not fit on 4");
        } catch (WlmException e) {
            assertEquals(507, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("needs 2 device(s) but only 0 of 4 are free"));
        }
        ModelDescription d = models.describe("c", null).get(0);
        assertEquals("a refused scale-up changes nothing", 2, d.settings().minWorkers);
        assertEquals(2, d.workers().size());
        assertEquals(200, models.scale("c", null, 1, 1, true).status());
        assertEquals(1, devices("c").size());
        // the stopped worker's devices are free again
        assertEquals(200, models.scale("c", null, 2, 2, true).status());
        assertEquals(List.of("0,1", "2,3"), devices("c"));
        models.unregister("c", null);
        Path other = model("o", "parallelType: custom\nparallelLevel: 4\ndeviceType: gpu\n");
        assertEquals("unregistering freed every device", 200, register(other, 1).status());
        assertEquals(List.of("0,1,2,3"), devices("o"));
    }

    @Test
    public void deviceIdsLimitTheChoiceAndARegistrationThatDoesNotFitIsRefused() throws Exception {
        server(4);
        Path m = model("ids", "parallelType: custom\nparallelLevel: 2\ndeviceType: gpu\ndeviceIds: [2, 3]\n");
        assertEquals(200, register(m, 1).status());
        assertEquals(List.of("2,3"), devices("ids"));
        Path again = model("ids2", "parallelType: custom\nparallelLevel: 2\ndeviceType: gpu\ndeviceIds: [1, 2]\n");
        try {
            register(again, 1);
            fail("device 2 is taken");
        } catch (WlmException e) {
            assertEquals(507, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("only 1 of 2 are free among deviceIds [1, 2]"));
        }
        assertTrue("a refused model is not registered", !models.modelNames().contains("ids2"));
        Path outside = model("far", "parallelType: custom\nparallelLevel: 1\ndeviceType: gpu\ndeviceIds: [7]\n");
        try {
            register(outside, 1);
            fail("device 7 does not exist");
        } catch (WlmException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("names device 7 but this server has 4 device(s)"));
        }
    }

    @Test
    public void onCpuNoDevicesAreReserved() throws Exception {
        server(0);
        Path m = model("cpu", "parallelType: custom\nparallelLevel: 2\n");
        assertEquals(200, register(m, 2).status());
        assertEquals(List.of("cpu", "cpu"), models.describe("cpu", null).get(0).workers().stream()
                .map(w -> w.ranks().get(0).devices()).sorted().toList());
    }

    @Test
    public void inconsistentParallelSettingsAreRefusedAtRegistration() throws Exception {
        server(4);
        Path m = model("bad", "parallelType: tp\nparallelLevel: 2\ntorchrun:\n  nproc-per-node: 3\n");
        try {
            register(m, 1);
            fail("nproc-per-node 3 vs parallelLevel 2");
        } catch (WlmException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("torchrun.nproc-per-node (3) differs from parallelLevel (2)"));
        }
    }
}
