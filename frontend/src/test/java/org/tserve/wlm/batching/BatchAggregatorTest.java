package org.tserve.wlm.batching;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingDeque;
import org.junit.Test;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;

public class BatchAggregatorTest {
    private static final JobResponder NOOP = new JobResponder() {
        @Override
        public void onChunk(Response chunk) {
        }

        @Override
        public void onResult(Response result) {
        }

        @Override
        public void onError(int status, String message) {
        }
    };

    private static Job job() {
        return new Job("m", null, List.of(), List.of(), NOOP);
    }

    @Test
    public void takesAtMostBatchSizeJobsInOrder() throws Exception {
        LinkedBlockingDeque<Job> q = new LinkedBlockingDeque<>();
        List<Job> all = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Job j = job();
            all.add(j);
            q.add(j);
        }
        List<Job> first = BatchAggregator.poll(q, 3, 0, 100);
        assertEquals(all.subList(0, 3), first);
        List<Job> second = BatchAggregatorTest.pollAll(q, 3);
        assertEquals(all.subList(3, 5), second);
        assertTrue(q.isEmpty());
    }

    private static List<Job> pollAll(LinkedBlockingDeque<Job> q, int size) throws InterruptedException {
        return BatchAggregator.poll(q, size, 0, 100);
    }

    @Test
    public void emptyQueueGivesAnEmptyBatch() throws Exception {
        assertTrue(BatchAggregator.poll(new LinkedBlockingDeque<>(), 4, 50, 10).isEmpty());
    }

    @Test
    public void waitsWithinMaxBatchDelayForLaterJobs() throws Exception {
        LinkedBlockingDeque<Job> q = new LinkedBlockingDeque<>();
        Job a = job();
        Job b = job();
        q.add(a);
        Thread producer = new Thread(() -> {
            try {
                // the aggregator is already waiting on the first job's batch when b arrives
                while (!q.isEmpty()) {
                    Thread.sleep(5);
                }
                q.add(b);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        producer.start();
        // a long delay: the batch is complete (size 2) as soon as b arrives
        List<Job> batch = BatchAggregator.poll(q, 2, 60000, 1000);
        producer.join();
        assertEquals(List.of(a, b), batch);
    }

    @Test
    public void zeroDelayTakesOnlyWhatIsQueued() throws Exception {
        LinkedBlockingDeque<Job> q = new LinkedBlockingDeque<>();
        Job a = job();
        q.add(a);
        assertEquals(List.of(a), BatchAggregator.poll(q, 8, 0, 100));
    }

    @Test
    public void describeJobTravelsAlone() throws Exception {
        LinkedBlockingDeque<Job> q = new LinkedBlockingDeque<>();
        Job a = job();
        Job d = Job.describe("m", null, NOOP);
        Job c = job();
        q.add(a);
        q.add(d);
        q.add(c);
        assertEquals(List.of(a), BatchAggregator.poll(q, 8, 0, 100));
        List<Job> second = BatchAggregator.poll(q, 8, 0, 100);
        assertEquals(1, second.size());
        assertSame(d, second.get(0));
        assertEquals(List.of(c), BatchAggregator.poll(q, 8, 0, 100));
    }

    @Test
    public void jobIsAnsweredExactlyOnce() {
        int[] calls = new int[2];
        Job j = new Job("m", null, List.of(), List.of(), new JobResponder() {
            @Override
            public void onChunk(Response chunk) {
            }

            @Override
            public void onResult(Response result) {
                calls[0]++;
            }

            @Override
            public void onError(int status, String message) {
                calls[1]++;
            }
        });
        assertTrue(j.fail(503, "x"));
        assertTrue(!j.fail(500, "y"));
        assertTrue(!j.result(new Response(j.getId(), 200, "", "", List.of(), new byte[0])));
        assertEquals(0, calls[0]);
        assertEquals(1, calls[1]);
    }
}
