package org.tserve.wlm;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;
import org.tserve.wlm.api.WlmListener;

/**
 * Tells every registered {@link WlmListener} what the workers did: the one listener the workers
 * are given (in their {@code WorkerContext}), passing each event on to all of them.
 */
final class WlmListeners implements WlmListener {
    private static final Logger LOG = Logging.logger(WlmListeners.class);

    private final List<WlmListener> listeners = new CopyOnWriteArrayList<>();

    void add(WlmListener l) {
        listeners.add(l);
    }

    @Override
    public void onInferenceSubmitted(String model, String version) {
        each(l -> l.onInferenceSubmitted(model, version));
    }

    @Override
    public void onJobDone(String model, String version, int status, long queueNanos, long backendNanos) {
        each(l -> l.onJobDone(model, version, status, queueNanos, backendNanos));
    }

    @Override
    public void onHandlerMetrics(String model, String version, String workerId, String json) {
        each(l -> l.onHandlerMetrics(model, version, workerId, json));
    }

    @Override
    public void onWorkerThreadTime(String model, String version, String workerName, long nanos) {
        each(l -> l.onWorkerThreadTime(model, version, workerName, nanos));
    }

    @Override
    public void onWorkerLoaded(String model, String version, String workerName, long millis) {
        each(l -> l.onWorkerLoaded(model, version, workerName, millis));
    }

    /** A failing listener is logged and skipped: it must not break the worker thread calling it. */
    private void each(Consumer<WlmListener> call) {
        for (WlmListener l : listeners) {
            try {
                call.accept(l);
            } catch (RuntimeException e) {
                LOG.warn("listener failed: " + e);
            }
        }
    }
}
