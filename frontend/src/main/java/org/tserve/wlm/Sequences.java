package org.tserve.wlm;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;
import org.tserve.config.ModelSettings;
import org.tserve.util.Ids;
import org.tserve.wlm.protocol.Header;

/**
 * The open sequences of a stateful model (TorchServe's sequenceBatching). A sequence is pinned to
 * one worker — its state lives in that worker's handler — and its requests run there one at a
 * time, in arrival order: the next waits (up to maxSequenceJobQueueSize) until the one before it
 * is answered. A request without {@code ts_request_sequence_id} opens a sequence with a new id
 * (and {@code ts_request_sequence_start: true}); the answer carries the id; {@code
 * ts_request_sequence_end: true} closes it after that request; an idle sequence closes after
 * sequenceMaxIdleMSec, and one whose worker died closes with it.
 */
final class Sequences {
    static final String ID = "ts_request_sequence_id";
    static final String START = "ts_request_sequence_start";
    static final String END = "ts_request_sequence_end";

    /** One open sequence. Guarded by the enclosing Sequences. */
    private static final class Sequence {
        final String id;
        final WorkerThread worker;
        final ArrayDeque<Job> waiting = new ArrayDeque<>();
        final long opened;
        long lastActive;
        boolean running;
        boolean ending;

        Sequence(String id, WorkerThread worker, long now) {
            this.id = id;
            this.worker = worker;
            this.opened = now;
            this.lastActive = now;
        }
    }

    private final Model model;
    private final LongSupplier millisClock;
    private final Map<String, Sequence> open = new LinkedHashMap<>();

    Sequences(Model model, LongSupplier millisClock) {
        this.model = model;
        this.millisClock = millisClock;
    }

    /** Routes {@code job} to its sequence's worker, or queues it behind the request running there. */
    synchronized void submit(Job job, List<WorkerThread> active) throws WlmException {
        ModelSettings s = model.getSettings();
        String id = job.header(ID);
        Sequence seq = id == null ? null : open.get(id);
        if (seq == null) {
            if (open.size() >= s.sequenceLimit()) {
                throw new WlmException(503, "Model \"" + model.name + "\" has " + open.size() + " sequences open, its "
                        + "maxNumSequence; retry later (idle ones close after sequenceMaxIdleMSec="
                        + s.sequenceMaxIdleMSec + ") or raise maxNumSequence");
            }
            List<Header> added = new ArrayList<>();
            if (id == null) {
                id = "ts-seq-" + Ids.fastUuid();
                added.add(new Header(ID, id));
            }
            added.add(new Header(START, "true"));
            job.addHeaders(added);
            seq = new Sequence(id, leastLoaded(active), millisClock.getAsLong());
            open.put(id, seq);
        } else if (seq.running && seq.waiting.size() >= s.maxSequenceJobQueueSize) {
            throw new WlmException(503, "Sequence " + id + " of model \"" + model.name + "\" already has "
                    + seq.waiting.size() + " request(s) waiting (maxSequenceJobQueueSize=" + s.maxSequenceJobQueueSize
                    + "); send the next one after an answer, or raise maxSequenceJobQueueSize");
        }
        job.addAnswerHeader(new Header(ID, id));
        if ("true".equalsIgnoreCase(job.header(END))) {
            seq.ending = true;
        }
        Sequence pinned = seq;
        job.onDone(() -> answered(pinned));
        if (seq.running) {
            seq.waiting.add(job);
        } else {
            seq.running = true;
            send(seq, job);
        }
    }

    /** The sequence's request was answered: the next one goes, or the sequence idles (or ends). */
    private synchronized void answered(Sequence seq) {
        seq.lastActive = millisClock.getAsLong();
        Job next = seq.waiting.poll();
        if (next != null) {
            send(seq, next);
            return;
        }
        seq.running = false;
        if (seq.ending) {
            open.remove(seq.id, seq);
        }
    }

    private void send(Sequence seq, Job job) {
        if (!seq.worker.sequenceQueue().offerLast(job)) {
            job.fail(503, "Job queue of worker " + seq.worker.getId() + " of model " + model.name + " is full; retry later");
        }
    }

    /** The worker with the fewest open sequences. */
    private WorkerThread leastLoaded(List<WorkerThread> active) throws WlmException {
        WorkerThread best = null;
        int bestCount = Integer.MAX_VALUE;
        for (WorkerThread w : active) {
            int n = 0;
            for (Sequence s : open.values()) {
                n += s.worker == w ? 1 : 0;
            }
            if (n < bestCount) {
                best = w;
                bestCount = n;
            }
        }
        if (best == null) {
            throw new WlmException(503, "Model \"" + model.name + "\" has no worker to serve a new sequence");
        }
        return best;
    }

    /** Closes idle sequences (sequenceMaxIdleMSec) and, when set, those past sequenceTimeoutMSec. */
    synchronized void expire() {
        if (open.isEmpty()) {
            return;
        }
        ModelSettings s = model.getSettings();
        long now = millisClock.getAsLong();
        open.values().removeIf(seq -> !seq.running && (now - seq.lastActive > s.sequenceMaxIdleMSec
                || s.sequenceTimeoutMSec > 0 && now - seq.opened > s.sequenceTimeoutMSec));
    }

    /**
     * The worker's process ended: its sequences' state is gone, so they close; what waited for
     * them, and what sat in the worker's own queue, fails naming why.
     */
    void closeFor(WorkerThread worker, String why) {
        List<Job> lost = new ArrayList<>();
        worker.sequenceQueue().drainTo(lost);
        synchronized (this) {
            for (Iterator<Sequence> it = open.values().iterator(); it.hasNext();) {
                Sequence seq = it.next();
                if (seq.worker == worker) {
                    it.remove();
                    lost.addAll(seq.waiting);
                    seq.waiting.clear();
                    seq.ending = true;
                }
            }
        }
        for (Job j : lost) {
            j.fail(500, "Sequence lost its state: worker " + worker.getId() + " of model " + model.name + " ended ("
                    + why + "); start a new sequence (omit ts_request_sequence_id)");
        }
    }

    synchronized int openCount() {
        return open.size();
    }
}
