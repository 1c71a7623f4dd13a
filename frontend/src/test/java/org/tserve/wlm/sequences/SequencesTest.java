package org.tserve.wlm.sequences;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.TestModels;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.registry.Model;
import org.tserve.wlm.supervision.WorkerContext;
import org.tserve.wlm.supervision.WorkerThread;

/**
 * Sequences' routing and lifecycle, with workers that are built but never started: what reaches
 * a worker is what sits in its sequence queue (the writer would send it in that order). The
 * clock is a fake one, moved by hand.
 */
public class SequencesTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private ModelManager manager;
    private final AtomicLong now = new AtomicLong(1_000);
    private final Map<Job, Answer> answers = new java.util.HashMap<>();
    /** The sequence ids told to a worker (SEQUENCE_END), in order. */
    private final List<String> told = new ArrayList<>();
    /** Runs while a SEQUENCE_END is being written. */
    private Runnable duringEnd = () -> { };
    private Sequences seqs;
    private List<WorkerThread> workers;

    /** A recorded answer: its status (0 while unanswered) and the answer's headers. */
    private static final class Answer implements JobResponder {
        volatile int status;
        volatile List<Header> headers = List.of();

        @Override
        public void onChunk(Response chunk) {
        }

        @Override
        public void onResult(Response r) {
            status = r.status();
            headers = r.headers();
        }

        @Override
        public void onError(int s, String message) {
            status = s;
            headers = List.of(new Header("message", message));
        }

        String header(String name) {
            for (Header h : headers) {
                if (h.name().equalsIgnoreCase(name)) {
                    return h.value();
                }
            }
            return null;
        }
    }

    private void model(Map<String, Object> keys) throws Exception {
        if (manager != null) {
            manager.shutdown();
        }
        Path dir = tmp.newFolder().toPath();
        manager = TestModels.manager(dir, TestModels.config(dir, ""));
        ModelSettings s = new ModelSettings();
        s.apply(keys, "test", new ArrayList<>());
        s.checkSequences("m");
        Model m = TestModels.model("m", "1.0", s);
        seqs = new Sequences(m, now::get, (w, id) -> {
            told.add(id);
            duringEnd.run();
        });
        WorkerContext ctx = TestModels.workerContext(dir);
        workers = List.of(new WorkerThread(ctx, m, 65520, -1, null, 0, w -> { }),
                new WorkerThread(ctx, m, 65521, -1, null, 0, w -> { }));
    }

    private void stateful(int queuePerSequence, int maxSequences, boolean continuous) throws Exception {
        model(Map.of("sequenceBatching", true, "sequenceMaxIdleMSec", 500, "sequenceTimeoutMSec", 5_000,
                "maxSequenceJobQueueSize", queuePerSequence, "maxNumSequence", maxSequences,
                "continuousBatching", continuous, "batchSize", 4, "minWorkers", 2, "maxWorkers", 2));
    }

    @After
    public void stop() {
        if (manager != null) {
            manager.shutdown();
        }
    }

    private Job job(String seq, String... moreHeaders) {
        List<Header> hs = new ArrayList<>();
        if (seq != null) {
            hs.add(new Header(Sequences.ID, seq));
        }
        for (int i = 0; i < moreHeaders.length; i += 2) {
            hs.add(new Header(moreHeaders[i], moreHeaders[i + 1]));
        }
        Answer a = new Answer();
        Job j = new Job("m", null, hs, List.of(), a);
        answers.put(j, a);
        return j;
    }

    private Job submit(Job j) throws WlmException {
        seqs.submit(j, workers);
        return j;
    }

    /** What the worker holding {@code j}'s sequence has been handed, in order. */
    private List<Job> sentTo(WorkerThread w) {
        return new ArrayList<>(w.sequenceQueue());
    }

    /** The worker takes and answers {@code j} (200, with the handler's {@code headers}). */
    private void answer(WorkerThread w, Job j, Header... headers) {
        assertTrue("the worker must hold " + j.getId(), w.sequenceQueue().remove(j));
        j.result(new Response(j.getId(), 200, "", "text/plain", List.of(headers), new byte[0]));
    }

    private WorkerThread holder(Job j) {
        for (WorkerThread w : workers) {
            if (w.sequenceQueue().contains(j)) {
                return w;
            }
        }
        throw new AssertionError("no worker holds " + j.getId());
    }

    @Test
    public void cancellingAQueuedRequestSendsNothingWhileTheEarlierOneRuns() throws Exception {
        stateful(4, 4, false);
        Job first = submit(job("s"));
        WorkerThread w = holder(first);
        Job second = submit(job("s"));
        Job third = submit(job("s"));
        assertTrue(third.cancel());
        assertEquals("the running request is alone at the worker", List.of(first), sentTo(w));
        assertTrue(second.cancel() || second.isDone());
        assertEquals(List.of(first), sentTo(w));
        Job fourth = submit(job("s"));
        assertEquals("the sequence is still busy: the fourth waits", List.of(first), sentTo(w));
        answer(w, first);
        assertEquals("the cancelled ones are dropped, the next one goes", List.of(fourth), sentTo(w));
        assertEquals(499, answers.get(third).status);
    }

    @Test
    public void cancellingTheRequestBeforeItIsWrittenLetsTheNextGo() throws Exception {
        stateful(4, 4, true);
        Job first = submit(job("s"));
        WorkerThread w = holder(first);
        Job second = submit(job("s"));
        assertTrue(first.isCancellable());
        assertTrue(first.cancel());
        assertEquals("the unsent request left the worker's queue, the next took its turn", List.of(second), sentTo(w));
    }

    @Test
    public void aRequestCancelledWhileTheWorkerRunsItHoldsTheNextUntilTheWorkerAnswers() throws Exception {
        stateful(4, 4, false);   // no continuous batching: the worker cannot cancel a running request
        Job first = submit(job("s"));
        WorkerThread w = holder(first);
        assertTrue(w.sequenceQueue().remove(first));
        first.heldByWorker();   // written (BatchWriter.dispatch)
        Job second = submit(job("s"));
        assertTrue(first.cancel());
        assertEquals("the client was told", 499, answers.get(first).status);
        assertEquals("the worker still runs the first: the second waits", List.of(), sentTo(w));
        first.result(new Response(first.getId(), 200, "", "text/plain", List.of(), new byte[0]));
        assertEquals("the worker answered: the second goes", List.of(second), sentTo(w));
        assertEquals("the gone client's answer stays 499", 499, answers.get(first).status);
    }

    @Test
    public void underTheSwitchAContinuousSequencesNextRequestJoinsTheRunningOne() throws Exception {
        // TorchServe 0.12's test_infer_stateful_cancel: a "-1" request of the sequence reaches the handler
        // while the sequence's first request still streams, and stops it
        stateful(4, 4, true);
        Job streaming = submit(job("s"));
        WorkerThread w = holder(streaming);
        Job cancel = submit(job("s"));
        assertEquals("tserve: one request of a sequence at the worker", List.of(streaming), sentTo(w));
        answer(w, streaming);
        answer(w, cancel);
        org.tserve.config.Compatibility.install(org.tserve.config.Compatibility.TORCHSERVE_0_12);
        try {
            Job first = submit(job("s"));
            Job second = submit(job("s"));
            Job third = submit(job("s"));
            assertEquals("the next one joins the running one; a third waits", List.of(first, second), sentTo(w));
            answer(w, second);   // the cancel is answered first
            assertEquals(List.of(first, third), sentTo(w));
            answer(w, first);
            answer(w, third);
            assertEquals(200, answers.get(first).status);
        } finally {
            org.tserve.config.Compatibility.install(org.tserve.config.Compatibility.TSERVE);
        }
        stateful(4, 4, false);   // without continuous batching the worker runs one request at a time anyway
        org.tserve.config.Compatibility.install(org.tserve.config.Compatibility.TORCHSERVE_0_12);
        try {
            Job one = submit(job("t"));
            WorkerThread wt = holder(one);
            submit(job("t"));
            assertEquals(List.of(one), sentTo(wt));
        } finally {
            org.tserve.config.Compatibility.install(org.tserve.config.Compatibility.TSERVE);
        }
    }

    @Test
    public void severalSequencesRunAtOnceEachInOrder() throws Exception {
        stateful(4, 4, true);
        Job a1 = submit(job("a"));
        Job b1 = submit(job("b"));
        Job a2 = submit(job("a"));
        Job b2 = submit(job("b"));
        WorkerThread wa = holder(a1);
        WorkerThread wb = holder(b1);
        assertTrue("sequences spread over the workers", wa != wb);
        assertEquals(List.of(a1), sentTo(wa));
        answer(wa, a1);
        assertEquals(List.of(a2), sentTo(wa));
        assertEquals(List.of(b1), sentTo(wb));
        answer(wb, b1);
        assertEquals(List.of(b2), sentTo(wb));
        assertEquals("true", a1.header(Sequences.START));
        assertNull("only a sequence's first request starts it", a2.header(Sequences.START));
    }

    @Test
    public void theHandlersEndHeaderClosesTheSequenceAndItsIdStartsAfresh() throws Exception {
        stateful(4, 4, true);
        Job a = submit(job(null));
        String id = a.header(Sequences.ID);
        assertTrue(id.startsWith("ts-seq-"));
        answer(holder(a), a, new Header(Sequences.END, "other;" + id));
        assertEquals(0, seqs.openCount());
        Job again = submit(job(id));
        assertEquals("true", again.header(Sequences.START));
        assertEquals(id, answers.get(a).header(Sequences.ID));
    }

    @Test
    public void theHandlerMayEndAnotherIdleSequenceOfItsWorker() throws Exception {
        stateful(4, 4, true);
        Job a = submit(job("a"));
        WorkerThread w = holder(a);
        answer(w, a);
        Job b = submit(job("b"));
        Job c = submit(job("c"));   // the least loaded worker: a's (b went to the other one)
        assertTrue(holder(b) != w && holder(c) == w);
        answer(w, c, new Header(Sequences.END, "a"));
        assertEquals(2, seqs.openCount());
        assertEquals("true", submit(job("a")).header(Sequences.START));
    }

    @Test
    public void theClientsEndHeaderClosesAfterThatAnswerAndFailsWhatWaitedBehind() throws Exception {
        stateful(4, 4, false);
        Job a = submit(job("a"));
        WorkerThread w = holder(a);
        Job last = submit(job("a", Sequences.END, "true"));
        Job late = submit(job("a"));
        answer(w, a);
        answer(w, last);
        assertEquals(409, answers.get(late).status);
        assertEquals(0, seqs.openCount());
    }

    @Test
    public void idleAndOldSequencesExpireButNotBusyOnes() throws Exception {
        stateful(4, 4, true);
        Job a = submit(job("a"));
        answer(holder(a), a);
        Job b = submit(job("b"));   // still running
        now.addAndGet(501);
        seqs.expire();
        assertEquals("the idle one closed, the running one stays", 1, seqs.openCount());
        answer(holder(b), b);
        for (int i = 0; i < 12; i++) {   // active all along, but past sequenceTimeoutMSec in all
            now.addAndGet(400);
            Job more = submit(job("b"));
            answer(holder(more), more);
            seqs.expire();
        }
        assertEquals(0, seqs.openCount());
        // an expired id is not silently a new sequence: 503 saying why, as TorchServe answers it
        expect503(job("a"), "expired after sequenceMaxIdleMSec=500");
        expect503(job("b"), "expired after sequenceTimeoutMSec=5000");
        assertEquals("true", submit(job(null)).header(Sequences.START));
    }

    @Test
    public void everyCloseIsToldAndAReusedIdWaitsForItsEndFrame() throws Exception {
        stateful(4, 4, true);
        Job a = submit(job("a", Sequences.END, "true"));
        WorkerThread w = holder(a);
        List<Job> reopened = new ArrayList<>();
        duringEnd = () -> {   // a request that reuses the id arrives while SEQUENCE_END is written
            try {
                reopened.add(submit(job("a")));
            } catch (WlmException e) {
                throw new AssertionError(e);
            }
            assertEquals("nothing of the new sequence before the old one's end", List.of(), sentTo(w));
        };
        answer(w, a);
        duringEnd = () -> { };
        assertEquals(List.of("a"), told);
        assertEquals("the new sequence's request goes after the end frame", reopened, sentTo(holder(reopened.get(0))));
        assertEquals("true", reopened.get(0).header(Sequences.START));
        answer(holder(reopened.get(0)), reopened.get(0));
        now.addAndGet(501);
        seqs.expire();
        assertEquals("the idle one is told too", List.of("a", "a"), told);
    }

    @Test
    public void aSequenceWhoseWorkerEndedAnswers503() throws Exception {
        stateful(4, 4, true);
        Job a = submit(job("a"));
        seqs.closeFor(holder(a), "exit status 9");
        expect503(job("a"), "lost its state");
        assertEquals(0, seqs.openCount());
    }

    @Test
    public void fullLimitsAre503NamingTheKey() throws Exception {
        stateful(1, 2, true);
        submit(job("a"));
        submit(job("a"));
        expect503(job("a"), "maxSequenceJobQueueSize");
        submit(job("b"));
        expect503(job("c"), "maxNumSequence");
    }

    private void expect503(Job j, String key) {
        try {
            submit(j);
            fail("503 naming " + key + " expected");
        } catch (WlmException e) {
            assertEquals(503, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains(key));
        }
    }
}
