package org.tserve.grpc;

import io.grpc.BindableService;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.protobuf.services.HealthStatusManager;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Health;
import org.tserve.wlm.api.WlmException;

/**
 * The standard {@code grpc.health.v1.Health} service (grpc-java's own), fed from the model
 * manager every {@link #PERIOD_MS} ms: the server ({@code ""}) and tserve's gRPC services are
 * SERVING once the startup models are loaded and {@code /ping} is not Unhealthy; a service named
 * after a model is SERVING while its default version has a READY worker, NOT_SERVING while it has
 * none, and NOT_FOUND once the model is unregistered. At shutdown everything turns NOT_SERVING.
 */
final class GrpcHealth {
    private static final Logger LOG = Logging.logger(GrpcHealth.class);
    static final long PERIOD_MS = 250;

    private final ModelManager models;
    private final List<String> serviceNames;
    private final HealthStatusManager status = new HealthStatusManager();
    private final ScheduledExecutorService poller = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "grpc-health");
        t.setDaemon(true);
        return t;
    });
    private Set<String> published = new HashSet<>();

    GrpcHealth(ModelManager models, List<String> serviceNames) {
        this.models = models;
        this.serviceNames = serviceNames;
        refresh();
        poller.scheduleWithFixedDelay(this::refreshQuietly, PERIOD_MS, PERIOD_MS, TimeUnit.MILLISECONDS);
    }

    /** The service to add to both gRPC servers. */
    BindableService service() {
        return status.getHealthService();
    }

    /** One failed refresh must not end the polling (an exception would cancel the schedule for good). */
    private void refreshQuietly() {
        try {
            refresh();
        } catch (RuntimeException e) {
            LOG.warn("gRPC health: cannot read the models' state: " + e);
        }
    }

    private void refresh() {
        ServingStatus server = models.health() == Health.UNHEALTHY ? ServingStatus.NOT_SERVING : ServingStatus.SERVING;
        status.setStatus(HealthStatusManager.SERVICE_NAME_ALL_SERVICES, server);
        for (String s : serviceNames) {
            status.setStatus(s, server);
        }
        Set<String> now = new HashSet<>();
        for (String model : models.modelNames()) {
            try {
                status.setStatus(model, models.hasReadyWorker(model, null) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
                now.add(model);
            } catch (WlmException e) {
                // unregistered between the listing and the check: cleared below
            }
        }
        for (String gone : published) {
            if (!now.contains(gone)) {
                status.clearStatus(gone);
            }
        }
        published = now;
    }

    /** Every service NOT_SERVING from now on (clients see it before the ports close). */
    void stop() {
        poller.shutdownNow();
        status.enterTerminalState();
    }
}
