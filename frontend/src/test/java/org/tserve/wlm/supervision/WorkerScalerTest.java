package org.tserve.wlm.supervision;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.dist.DeviceAllocator;
import org.tserve.dist.PortBlockAllocator;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.TestModels;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.registry.Model;

/**
 * What the scaler reserves for a worker and gives back: devices and torchrun port blocks. The
 * workers are built but never started, so no process runs. Port blocks are drawn from the top
 * six ports (65530..65535): the allocator wraps there, so a port not given back is seen at once.
 */
public class WorkerScalerTest {
    private static final int FIRST_PORT = 65530;

    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private ModelManager manager;
    private DeviceAllocator devices;
    private PortBlockAllocator ports;
    private WorkerScaler scaler;

    private void server(int gpus) throws Exception {
        Path dir = tmp.getRoot().toPath();
        ConfigManager cfg = TestModels.config(dir, "number_of_gpu=" + gpus + "\n");
        manager = TestModels.manager(dir, cfg);
        devices = new DeviceAllocator(gpus);
        ports = new PortBlockAllocator(FIRST_PORT);
        scaler = new WorkerScaler(TestModels.workerContext(dir), cfg, devices, ports);
    }

    @After
    public void stop() {
        if (manager != null) {
            manager.shutdown();
        }
    }

    private static Model gpuModel(String parallelType, int parallelLevel, List<Integer> deviceIds) {
        ModelSettings s = new ModelSettings();
        s.deviceType = "gpu";
        s.parallelType = parallelType;
        s.parallelLevel = parallelLevel;
        s.deviceIds = new ArrayList<>(deviceIds);
        return TestModels.model("m", "1.0", s);
    }

    private WorkerThread newWorker(Model m) throws WlmException {
        return scaler.newWorker(m, m.getSettings(), m.dist, 0, 1);
    }

    /** True when all six ports are free again: take them as one block. */
    private boolean allPortsFree() {
        try {
            return ports.take(6) == FIRST_PORT;
        } catch (IllegalStateException e) {
            return false;
        }
    }

    @Test
    public void aRefusedAddGivesBackWhatTheWorkersBeforeItReserved() throws Exception {
        server(2);
        Model m = gpuModel("tp", 2, List.of());
        try {
            scaler.addWorkers(m, 2);
            fail("the second worker finds no free device");
        } catch (WlmException e) {
            assertEquals(507, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().startsWith("Cannot start worker 2 of 2 for model m (parallelLevel 2)"));
        }
        assertTrue("no worker of a refused add is kept", m.workers().isEmpty());
        assertEquals("the first worker's devices are free again", 2, devices.free());
        assertTrue("both workers' port blocks are free again", allPortsFree());
    }

    @Test
    public void aStoppedWorkerGivesBackItsDevicesAndPortBlock() throws Exception {
        server(2);
        Model m = gpuModel("tp", 2, List.of());
        WorkerThread w = newWorker(m);
        assertEquals(String.valueOf(FIRST_PORT), w.getId());
        assertEquals("ranks on 65530, 65531; rendezvous after them", FIRST_PORT + 2, w.getRdzvPort());
        assertEquals(0, devices.free());
        scaler.workerStopped(m, w);
        assertEquals(2, devices.free());
        assertTrue(allPortsFree());
    }

    @Test
    public void aCustomWorkerHoldsDevicesButNoPortBlock() throws Exception {
        server(4);
        Model m = gpuModel("custom", 2, List.of(2, 3));
        WorkerThread w = newWorker(m);
        assertEquals(List.of(2, 3), w.getDevices().deviceIds());
        assertEquals(0, w.getRdzvPort());
        assertEquals(0, w.getGpuId());
        scaler.workerStopped(m, w);
        assertEquals(4, devices.free());
    }

    @Test
    public void plainGpuWorkersTakeTheDeviceIdsInTurnAndReserveNothing() throws Exception {
        server(4);
        Model listed = gpuModel("", 0, List.of(1, 3));
        List<Integer> gpus = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            gpus.add(newWorker(listed).getGpuId());
        }
        assertEquals(List.of(1, 3, 1), gpus);
        Model any = gpuModel("", 0, List.of());
        gpus.clear();
        for (int i = 0; i < 5; i++) {
            gpus.add(newWorker(any).getGpuId());
        }
        assertEquals(List.of(0, 1, 2, 3, 0), gpus);
        assertEquals(4, devices.free());
    }

    @Test
    public void withoutGpusWorkersRunOnCpu() throws Exception {
        server(0);
        assertEquals(-1, newWorker(gpuModel("", 0, List.of())).getGpuId());
        WorkerThread custom = newWorker(gpuModel("custom", 2, List.of()));
        assertEquals(-1, custom.getGpuId());
        assertEquals(null, custom.getDevices());
    }

    @Test
    public void aBadRangeIsRefusedBeforeTheModelIsLookedUp() throws Exception {
        server(0);
        for (int[] range : new int[][] {{-1, 1}, {2, 1}}) {
            try {
                manager.scale("unknown", null, range[0], range[1], true);
                fail("range " + range[0] + ".." + range[1]);
            } catch (WlmException e) {
                assertEquals(e.getMessage(), 400, e.getStatus());
            }
        }
    }

    @Test
    public void workerCapsNameTheirKey() throws Exception {
        WorkerScaler.checkCaps("m", 0, 2, 0, 2, 0);
        WorkerScaler.checkCaps("m", 1, 1, 5, 0, 6);
        try {
            WorkerScaler.checkCaps("m", 1, 2, 0, 2, 0);
            fail("3 workers pass max_workers_per_model=2");
        } catch (WlmException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("max_workers_per_model"));
        }
        try {
            WorkerScaler.checkCaps("m", 0, 2, 5, 0, 6);
            fail("7 workers pass max_workers=6");
        } catch (WlmException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("max_workers ("));
        }
    }

    @Test
    public void aCappedAddStartsNothing() throws Exception {
        Path dir = tmp.getRoot().toPath();
        ConfigManager cfg = TestModels.config(dir, "max_workers_per_model=2\n");
        manager = TestModels.manager(dir, cfg);
        scaler = new WorkerScaler(TestModels.workerContext(dir), cfg, new DeviceAllocator(0), new PortBlockAllocator(FIRST_PORT));
        Model m = TestModels.model("m", "1.0", new ModelSettings());
        try {
            scaler.addWorkers(m, 3);
            fail("3 workers pass max_workers_per_model=2");
        } catch (WlmException e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains("max_workers_per_model"));
        }
        assertTrue(m.workers().isEmpty());
    }

    /**
     * The register/scale/unregister storm's leaked worker (issue 43), its interleaving forced: a
     * scale (or a registration) that found the version before an unregister took it out of the
     * registry reaches the scaler only after the unregister stopped "every" worker. It must start
     * none: a worker added then is one that no model describes and no unregister stops.
     */
    @Test
    public void aRetiredModelGetsNoNewWorker() throws Exception {
        server(0);
        Model m = TestModels.model("m", "1.0", new ModelSettings());
        scaler.stopAll(m);   // the unregister's retirement: its workers (none) stopped
        for (ThrowingAdd late : List.<ThrowingAdd>of(() -> scaler.scale(m, false, 1, 1, false),
                () -> scaler.addWorkers(m, 1))) {
            try {
                late.run();
                fail("a worker was started for an unregistered model");
            } catch (WlmException e) {
                assertEquals(404, e.getStatus());
                assertTrue(e.getMessage(), e.getMessage().contains("was unregistered"));
            }
            assertTrue(m.workers().isEmpty());
        }
        assertEquals("the refused scale left the settings as they were", 0, m.getSettings().minWorkers);
    }

    private interface ThrowingAdd {
        void run() throws WlmException;
    }
}
