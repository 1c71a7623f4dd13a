package org.tserve.wlm.batching;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.Test;
import org.tserve.wlm.CollectingResponder;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.Response;

/** The in-flight table on a fake clock: ids, one sweep for timeouts, answered-once, requeue. */
public class InFlightTableTest {
    private final AtomicLong now = new AtomicLong(1_000_000L);
    private final InFlightTable table = new InFlightTable(now::get);

    private final Map<Job, CollectingResponder> answers = new HashMap<>();

    private Job job() {
        CollectingResponder c = new CollectingResponder();
        Job j = new Job("m", "1.0", List.of(), List.of(), c);
        answers.put(j, c);
        return j;
    }

    private CollectingResponder responder(Job j) {
        return answers.get(j);
    }

    @Test
    public void batchIdsNeverTakeZeroOrLoadsId() {
        InFlightBatch a = table.add(List.of(job()), null, 1);
        InFlightBatch b = table.add(List.of(job()), null, 1);
        assertEquals(InFlightTable.LOAD_BATCH_ID + 1, a.id);
        assertEquals(a.id + 1, b.id);
        assertSame(a, table.get(a.id));
        assertEquals(2, table.size());
    }

    @Test
    public void batchIdsWrapAt32BitsSkippingReservedIds() throws Exception {
        java.lang.reflect.Field f = InFlightTable.class.getDeclaredField("ids");
        f.setAccessible(true);
        ((AtomicLong) f.get(table)).set(0xffffffffL - 1);
        assertEquals(0xffffffffL, table.add(List.of(job()), null, 1).id);
        assertEquals(2, table.add(List.of(job()), null, 1).id);
        assertEquals(3, table.add(List.of(job()), null, 1).id);
    }

    @Test
    public void sweepTakesOnlyBatchesPastTheirDeadline() {
        InFlightBatch shortOne = table.add(List.of(job()), null, 2);
        InFlightBatch longOne = table.add(List.of(job()), null, 10);
        now.addAndGet(TimeUnit.MILLISECONDS.toNanos(1999));
        assertTrue(table.takeExpired().isEmpty());
        now.addAndGet(TimeUnit.MILLISECONDS.toNanos(1));
        assertEquals(List.of(shortOne), table.takeExpired());
        assertTrue("a batch times out once", table.takeExpired().isEmpty());
        assertSame(longOne, table.get(longOne.id));
        assertNull("its late answer finds nothing", table.remove(shortOne.id));
    }

    @Test
    public void anAnsweredBatchIsNotTimedOut() {
        InFlightBatch b = table.add(List.of(job()), null, 1);
        assertSame(b, table.remove(b.id));
        now.addAndGet(TimeUnit.SECONDS.toNanos(5));
        assertTrue(table.takeExpired().isEmpty());
        assertFalse(table.remove(b));
    }

    @Test
    public void failAllFailsOnlyTheJobsThisTableHeld() {
        Job held1 = job();
        Job held2 = job();
        Job elsewhere = job();
        InFlightTable other = new InFlightTable(now::get);
        table.add(List.of(held1, held2), null, 60);
        other.add(List.of(elsewhere), null, 60);
        assertEquals(1, table.failAll(500, "worker died"));
        assertTrue(table.isEmpty());
        assertEquals(500, responder(held1).errorStatus);
        assertEquals("worker died", responder(held2).error.getNow("none"));
        assertFalse(elsewhere.isDone());
        assertEquals(1, other.size());
    }

    @Test
    public void aJobIsAnsweredOnceEvenIfFailedAfterItsResult() {
        Job j = job();
        table.add(List.of(j), null, 60);
        assertTrue(j.result(new Response(j.getId(), 200, "OK", "text/plain", List.of(), new byte[0])));
        table.failAll(500, "late failure");
        assertEquals(0, responder(j).errorStatus);
        assertTrue(responder(j).result.isDone());
    }

    @Test
    public void requeueKeepsOrderAtTheHeadAndAnswers503WhenFull() {
        LinkedBlockingDeque<Job> queue = new LinkedBlockingDeque<>(2);
        Job waiting = job();
        queue.add(waiting);
        Job a = job();
        Job b = job();
        InFlightTable.requeue(List.of(a, b), queue, "m");
        assertSame(b, queue.pollFirst());
        assertSame(waiting, queue.pollFirst());
        assertEquals(503, responder(a).errorStatus);
        assertTrue(responder(a).error.getNow("").contains("queue of model m is full"));
    }
}
