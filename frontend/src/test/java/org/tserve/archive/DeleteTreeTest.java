package org.tserve.archive;

import static org.junit.Assert.assertFalse;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

/**
 * {@link ModelArchive#deleteTree} of one tree from two threads at once, as an unregister and a
 * failed synchronous registration of the same version both retire it (issue 43's storm: the
 * unregister was answered 500 "management call failed" when its walk met files the other had
 * just deleted).
 */
public class DeleteTreeTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    @Test
    public void twoDeletesOfOneTreeAtOnceBothReturnAndLeaveNothing() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (int round = 0; round < 20; round++) {
                Path dir = tmp.newFolder("tree" + round).toPath();
                for (int d = 0; d < 20; d++) {
                    Path sub = Files.createDirectories(dir.resolve("d" + d).resolve("inner"));
                    for (int f = 0; f < 40; f++) {
                        Files.writeString(sub.resolve("f" + f), "x");
                        Files.writeString(sub.getParent().resolve("g" + f), "y");
                    }
                }
                CyclicBarrier together = new CyclicBarrier(2);
                List<Future<Object>> deletes = new ArrayList<>();
                long staggerNanos = (round % 10) * 1_000_000L;   // the second walk starts 0-9 ms into the first's deletes
                for (int t = 0; t < 2; t++) {
                    long wait = t == 0 ? 0 : staggerNanos;
                    deletes.add(pool.submit(() -> {
                        together.await();
                        LockSupport.parkNanos(wait);
                        ModelArchive.deleteTree(dir);
                        return null;
                    }));
                }
                for (Future<Object> delete : deletes) {
                    delete.get(60, TimeUnit.SECONDS);   // what a delete threw fails the test here
                }
                assertFalse("round " + round + ": " + dir + " is still there", Files.exists(dir));
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
