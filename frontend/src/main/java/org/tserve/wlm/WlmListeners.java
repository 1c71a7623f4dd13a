package org.tserve.wlm;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;
import org.tserve.wlm.api.WlmListener;
import org.tserve.wlm.registry.Model;

/** Tells every registered {@link WlmListener} what the workers did. */
final class WlmListeners {
    private static final Logger LOG = Logging.logger(WlmListeners.class);

    private final List<WlmListener> listeners = new CopyOnWriteArrayList<>();

    void add(WlmListener l) {
        listeners.add(l);
    }

    void inferenceSubmitted(String model, String version) {
        each(l -> l.onInferenceSubmitted(model, version));
    }

    /** {@code requestedVersion}: the version the request named, null for the default (as the request counter). */
    void jobDone(Model m, String requestedVersion, int status, long queueNanos, long backendNanos) {
        each(l -> l.onJobDone(m.name, requestedVersion, status, queueNanos, backendNanos));
    }

    void workerThreadTime(Model m, String workerName, long nanos) {
        each(l -> l.onWorkerThreadTime(m.name, m.version, workerName, nanos));
    }

    void workerLoaded(Model m, String workerName, long millis) {
        each(l -> l.onWorkerLoaded(m.name, m.version, workerName, millis));
    }

    void handlerMetrics(Model m, String workerId, String json) {
        each(l -> l.onHandlerMetrics(m.name, m.version, workerId, json));
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
