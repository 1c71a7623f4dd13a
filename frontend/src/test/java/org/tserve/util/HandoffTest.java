package org.tserve.util;

import static org.junit.Assert.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import org.junit.Test;

/** Tasks handed off inside a group reach each executor as one task, in order. */
public class HandoffTest {
    /** Records what it was given and runs it at once. */
    static final class CountingExecutor implements Executor {
        int executes;

        @Override
        public void execute(Runnable r) {
            executes++;
            r.run();
        }
    }

    @Test
    public void withoutAGroupEachTaskIsHandedOverAtOnce() {
        CountingExecutor a = new CountingExecutor();
        List<String> ran = new ArrayList<>();
        Handoff.execute(a, () -> ran.add("1"));
        Handoff.execute(a, () -> ran.add("2"));
        assertEquals(2, a.executes);
        assertEquals(List.of("1", "2"), ran);
    }

    @Test
    public void aGroupHandsEachExecutorOneTaskInOrderWhenItCloses() {
        CountingExecutor a = new CountingExecutor();
        CountingExecutor b = new CountingExecutor();
        List<String> ran = new ArrayList<>();
        Handoff.Group g = Handoff.open();
        try {
            Handoff.execute(a, () -> ran.add("a1"));
            Handoff.execute(b, () -> ran.add("b1"));
            Handoff.execute(a, () -> ran.add("a2"));
            Handoff.Group nested = Handoff.open();   // closing it hands nothing over yet
            Handoff.execute(a, () -> ran.add("a3"));
            nested.close();
            assertEquals(List.of(), ran);
        } finally {
            g.close();
        }
        assertEquals(1, a.executes);
        assertEquals(1, b.executes);
        assertEquals(List.of("a1", "a2", "a3", "b1"), ran);
        Handoff.execute(a, () -> ran.add("after"));   // the group is closed: direct again
        assertEquals(2, a.executes);
    }

    @Test
    public void aFailingTaskDoesNotCostTheOthersTheirTurn() {
        CountingExecutor a = new CountingExecutor();
        List<String> ran = new ArrayList<>();
        Handoff.Group g = Handoff.open();
        try {
            Handoff.execute(a, () -> ran.add("1"));
            Handoff.execute(a, () -> {
                throw new IllegalStateException("handler bug");
            });
            Handoff.execute(a, () -> ran.add("3"));
        } finally {
            g.close();
        }
        assertEquals(List.of("1", "3"), ran);
    }
}
