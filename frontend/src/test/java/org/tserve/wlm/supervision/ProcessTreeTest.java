package org.tserve.wlm.supervision;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

/** Finding a job's processes by tag after their parent died, and DeepSpeed's shm file names. */
public class ProcessTreeTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    @Test
    public void aGroupThatIgnoresSigtermIsKilledAfterTheGrace() throws Exception {
        // issue 27: a handler's child ignoring SIGTERM outlived the server; it is in the worker's group
        Path pidFile = tmp.getRoot().toPath().resolve("group.pid");
        ProcessBuilder pb = new ProcessBuilder("setsid", "sh", "-c",
                "trap '' TERM; (trap '' TERM; exec env -i sleep 120) & echo $$ $! > " + pidFile + "; wait");
        Process leader = pb.start();
        long deadline = System.currentTimeMillis() + 10000;
        while (!(Files.exists(pidFile) && Files.size(pidFile) > 0) && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        String[] pids = Files.readString(pidFile).trim().split(" ");
        long pgid = Long.parseLong(pids[0]);
        long child = Long.parseLong(pids[1]);
        assertEquals(pgid, ProcessTree.pgidOf(child));
        assertEquals(2, ProcessTree.group(pgid).size());
        assertEquals("both ignored SIGTERM", 2, ProcessTree.end(() -> ProcessTree.group(pgid), 300, "test"));
        assertTrue(leader.waitFor(10, TimeUnit.SECONDS));
        deadline = System.currentTimeMillis() + 10000;
        while (ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false) && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertFalse(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false));
        assertTrue(ProcessTree.group(pgid).isEmpty());
    }

    @Test
    public void orphanedChildrenAreFoundByTagAndKilled() throws Exception {
        String tag = "test-" + System.nanoTime();
        Path pidFile = tmp.getRoot().toPath().resolve("child.pid");
        ProcessBuilder pb = new ProcessBuilder("sh", "-c", "sleep 120 & echo $! > " + pidFile + "; wait");
        pb.environment().put(WorkerProcess.TAG_VAR, tag);
        Process parent = pb.start();
        long deadline = System.currentTimeMillis() + 10000;
        while (!(Files.exists(pidFile) && Files.size(pidFile) > 0) && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        long child = Long.parseLong(Files.readString(pidFile).trim());
        // the parent dies first, as torchrun's agent does: its child is re-parented, not gone
        parent.destroyForcibly();
        assertTrue(parent.waitFor(10, TimeUnit.SECONDS));
        assertTrue(ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false));
        assertEquals(List.of(child), ProcessTree.tagged(WorkerProcess.TAG_VAR, tag).stream().map(ProcessHandle::pid).toList());
        assertEquals("environ reads the tag too", tag, ProcessTree.environ(child).get(WorkerProcess.TAG_VAR));
        assertEquals(1, ProcessTree.end(() -> ProcessTree.tagged(WorkerProcess.TAG_VAR, tag), 0, "test"));
        deadline = System.currentTimeMillis() + 10000;
        while (ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false) && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertTrue(ProcessTree.tagged(WorkerProcess.TAG_VAR, tag).isEmpty());
    }

    @Test
    public void onlyTheWorkersShmBuffersAreRemoved() throws Exception {
        Path shm = tmp.newFolder("shm").toPath();
        String mine = ProcessTree.deepspeedShmPrefix("127.0.0.1", "40001");
        assertTrue(mine, mine.matches("deepspeed_allreduce_buffer_\\d+_127\\.0\\.0\\.1_40001_"));
        Files.createFile(shm.resolve(mine + "0"));
        Files.createFile(shm.resolve(mine + "1"));
        Path other = Files.createFile(shm.resolve(ProcessTree.deepspeedShmPrefix("127.0.0.1", "400011") + "0"));
        Path unrelated = Files.createFile(shm.resolve("torch_shm_x"));
        assertEquals(2, ProcessTree.removeShmFiles(shm, List.of(mine)));
        assertFalse(Files.exists(shm.resolve(mine + "0")));
        assertTrue("another job's port that merely starts alike stays", Files.exists(other));
        assertTrue(Files.exists(unrelated));
    }
}
