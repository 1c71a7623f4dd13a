package org.tserve.wlm;

import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.Test;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Response;

/**
 * Job.cancel frees the job's place before answering it (a stateful sequence's next request, let
 * go by the answer, must reach the worker after the CANCEL), and a cancel that came while the job
 * moved to where a new canceller frees it runs that canceller once it is set.
 */
public class JobCancelTest {
    private final List<String> events = new ArrayList<>();

    private Job job() {
        return new Job("m", null, List.of(), List.of(), new JobResponder() {
            @Override
            public void onChunk(Response chunk) {
            }

            @Override
            public void onResult(Response r) {
                events.add("result " + r.status());
            }

            @Override
            public void onError(int status, String message) {
                events.add("error " + status);
            }
        });
    }

    @Test
    public void theCancellerRunsBeforeTheAnswer() {
        Job j = job();
        j.onCancel(() -> events.add("freed, answered=" + j.isDone()));
        assertTrue(j.cancel());
        assertEquals(List.of("freed, answered=false", "error 499"), events);
        assertFalse("answered already: nothing to cancel", j.cancel());
    }

    @Test
    public void aCancelWhileTheJobMovesRunsTheNextCancellerWhenItIsSet() {
        Job j = job();
        j.onCancel(() -> events.add("left the queue"));
        j.onCancel(null);   // taken from the queue, not yet written
        assertTrue(j.cancel());
        j.onCancel(() -> events.add("CANCEL to the worker"));   // written: the CANCEL follows it
        assertEquals(List.of("error 499", "CANCEL to the worker"), events);
    }

    @Test
    public void aJobHeldByAWorkerTellsTheClientAtOnceButEndsWithTheWorkersAnswer() {
        Job j = job();
        List<String> ended = new ArrayList<>();
        j.onDone(() -> ended.add("done"));
        j.onCancel(() -> events.add("left the queue"));
        j.heldByWorker();   // written to a worker whose model cannot cancel it
        assertFalse("nothing to free: the worker cannot cancel it", j.isCancellable());
        assertTrue(j.cancel());
        assertEquals(List.of("error 499"), events);
        assertFalse("still the worker's", j.isDone());
        assertEquals(List.of(), ended);
        assertFalse("the client is told once", j.cancel());
        assertTrue(j.result(new Response(j.getId(), 200, "", "text/plain", List.of(), new byte[0])));
        assertEquals("the worker's answer is not sent to the gone client", List.of("error 499"), events);
        assertEquals(List.of("done"), ended);
    }

    @Test
    public void resultHeaderValuesSplitTorchServesIdList() {
        Job j = job();
        j.result(new Response(j.getId(), 200, "", "", List.of(new Header("TS_REQUEST_SEQUENCE_END", "a; b;"),
                new Header("other", "x")), new byte[0]));
        assertEquals(List.of("a", "b"), j.resultHeaderValues("ts_request_sequence_end"));
    }
}
