package org.tserve.wlm.supervision;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.CollectingResponder;
import org.tserve.wlm.FakeWorker;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.StatusResult;

/** The real worker thread against {@link FakeWorker}: pipelining, streaming, worker death. */
public class WorkerThreadTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private ModelManager models;

    private ModelManager start(String mode, String yaml) throws Exception {
        Path root = tmp.getRoot().toPath();
        Path model = root.resolve("model");
        Files.createDirectories(model.resolve("MAR-INF"));
        Files.write(model.resolve("MAR-INF/MANIFEST.json"), ("{\"runtime\": \"python\", \"model\": {\"modelName\": \"fake\", "
                + "\"handler\": \"h.py\", \"modelVersion\": \"1.0\", \"configFile\": \"model-config.yaml\"}}")
                .getBytes(StandardCharsets.UTF_8));
        Files.write(model.resolve("model-config.yaml"), yaml.getBytes(StandardCharsets.UTF_8));
        String cp = new File(FakeWorker.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath()
                + File.pathSeparator
                + new File(Job.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath();
        String java = ProcessHandle.current().info().command().orElse("java");
        Path python = root.resolve("fake-python");
        Files.write(python, ("#!/bin/sh\nshift 2\nexec '" + java + "' -Xshare:auto -XX:TieredStopAtLevel=1 -cp '" + cp
                + "' org.tserve.wlm.FakeWorker " + mode + " \"$@\"\n").getBytes(StandardCharsets.UTF_8));
        Files.setPosixFilePermissions(python, PosixFilePermissions.fromString("rwx------"));
        Path props = root.resolve("config.properties");
        Files.write(props, ("model_store=" + root + "\ndefault_response_timeout=60\n").getBytes(StandardCharsets.UTF_8));
        ConfigManager cfg = new ConfigManager(Arguments.parse(new String[] {"-f", props.toString()}), new HashMap<>());
        Path sockets = Files.createDirectories(root.resolve("sock"));
        WorkerEnvironment env = new WorkerEnvironment(python.toString(), sockets, root.toString(), null, true, false, "",
                true, "");
        models = new ModelManager(cfg, env, root);
        RegisterRequest r = new RegisterRequest(model.toString());
        r.initialWorkers = 1;
        StatusResult res = models.register(r);
        assertEquals(res.message(), 200, res.status());
        return models;
    }

    @After
    public void stop() {
        if (models != null) {
            models.shutdown();
        }
    }

    private static Job job(String body, CollectingResponder c) {
        return new Job("fake", null, List.of(new Header("x", "y")),
                List.of(new Part("body", "text/plain", body.getBytes(StandardCharsets.UTF_8))), c);
    }

    @Test
    public void twoBatchesInFlightAreMatchedByBatchId() throws Exception {
        start("pipeline", "batchSize: 1\nmaxBatchDelay: 0\nmaxBatchesInFlight: 2\n");
        CollectingResponder a = new CollectingResponder();
        CollectingResponder b = new CollectingResponder();
        models.submit(job("first", a));
        models.submit(job("second", b));
        // the fake worker answers only once both batches are outstanding, in reverse order
        Response ra = a.result.get(60, TimeUnit.SECONDS);
        Response rb = b.result.get(60, TimeUnit.SECONDS);
        String ta = new String(ra.body(), StandardCharsets.UTF_8);
        String tb = new String(rb.body(), StandardCharsets.UTF_8);
        assertTrue(ta, ta.endsWith(": first"));
        assertTrue(tb, tb.endsWith(": second"));
        assertNotEquals(ra.header("x-batch"), rb.header("x-batch"));
        assertEquals(2, models.describe("fake", null).get(0).settings().inFlightLimit());
    }

    @Test
    public void chunksArriveBeforeTheResult() throws Exception {
        start("stream", "batchSize: 1\n");
        CollectingResponder c = new CollectingResponder();
        models.submit(job("s", c));
        Response r = c.result.get(60, TimeUnit.SECONDS);
        assertEquals("c", new String(r.body(), StandardCharsets.UTF_8));
        synchronized (c) {
            assertEquals(List.of("a", "b"), c.chunks);
        }
    }

    @Test
    public void aJobThatFindsTheWorkerIdleIsWrittenByTheSubmittingThread() throws Exception {
        start("stream", "batchSize: 1\nmaxBatchDelay: 100\n");
        WorkerThread w = (WorkerThread) models.find("fake", null).workers().get(0);
        // A job submitted in the instant between an answer and its permit's release goes through
        // the queue; sequential jobs soon find the worker idle.
        for (int i = 0; i < 200 && w.directDispatches() == 0; i++) {
            CollectingResponder c = new CollectingResponder();
            models.submit(job("n" + i, c));
            assertEquals("c", new String(c.result.get(60, TimeUnit.SECONDS).body(), StandardCharsets.UTF_8));
        }
        assertTrue(w.directDispatches() > 0);
        // and the job queue path still works next to it: a burst is answered in full
        List<CollectingResponder> burst = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            CollectingResponder c = new CollectingResponder();
            burst.add(c);
            models.submit(job("b" + i, c));
        }
        for (CollectingResponder c : burst) {
            assertEquals("c", new String(c.result.get(60, TimeUnit.SECONDS).body(), StandardCharsets.UTF_8));
            assertEquals(List.of("a", "b"), c.chunks);
        }
    }

    @Test
    public void underLoadTheReaderWritesTheNextQueuedBatchItself() throws Exception {
        start("stream", "batchSize: 2\nmaxBatchDelay: 100\n");
        WorkerThread w = (WorkerThread) models.find("fake", null).workers().get(0);
        List<CollectingResponder> burst = new ArrayList<>();
        for (int round = 0; round < 20 && w.chainedDispatches() == 0; round++) {
            burst.clear();
            for (int i = 0; i < 20; i++) {
                CollectingResponder c = new CollectingResponder();
                burst.add(c);
                models.submit(job("r" + round + "-" + i, c));
            }
            for (CollectingResponder c : burst) {   // every job answered once, its chunks first
                assertEquals("c", new String(c.result.get(60, TimeUnit.SECONDS).body(), StandardCharsets.UTF_8));
                synchronized (c) {
                    assertEquals(List.of("a", "b"), c.chunks);
                }
            }
        }
        assertTrue(w.chainedDispatches() > 0);
    }

    @Test
    public void largeBatchesAreLeftToTheWriterThread() throws Exception {
        // two 40 KB requests make a batch past what the reader may write without risking a block
        start("stream", "batchSize: 2\nmaxBatchDelay: 100\n");
        WorkerThread w = (WorkerThread) models.find("fake", null).workers().get(0);
        String big = "x".repeat(40 * 1024);
        List<CollectingResponder> burst = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            CollectingResponder c = new CollectingResponder();
            burst.add(c);
            models.submit(job(big, c));
        }
        for (CollectingResponder c : burst) {
            assertEquals("c", new String(c.result.get(60, TimeUnit.SECONDS).body(), StandardCharsets.UTF_8));
        }
        assertEquals(0, w.chainedDispatches());
    }

    @Test
    public void aDyingWorkerFailsItsJobWithItsExitStatus() throws Exception {
        start("die", "batchSize: 1\n");
        CollectingResponder c = new CollectingResponder();
        models.submit(job("boom", c));
        String message = c.error.get(60, TimeUnit.SECONDS);
        assertEquals(500, c.errorStatus);
        assertTrue(message, message.startsWith("Worker died."));
        assertTrue(message, message.contains("status 3"));
    }
}
