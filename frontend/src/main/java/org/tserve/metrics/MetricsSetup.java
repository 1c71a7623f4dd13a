package org.tserve.metrics;

import java.io.File;
import java.net.URISyntaxException;
import org.apache.logging.log4j.Logger;
import org.tserve.config.ConfigManager;
import org.tserve.util.Logging;

/** Builds the server's {@link MetricsRegistry} and system-metrics collector from the configuration. */
public final class MetricsSetup {
    private static final Logger LOG = Logging.logger(MetricsSetup.class);
    private static SystemMetricsCollector collector;

    private MetricsSetup() {
    }

    /**
     * Loads metrics.yaml ({@code metrics_config}, else {@code <model_server_home>/ts/configs/metrics.yaml},
     * else the copy next to the frontend jar), installs the registry as {@link MetricsRegistry#get()}
     * and starts system metrics unless {@code disable_system_metrics=true}.
     */
    public static synchronized MetricsRegistry start(ConfigManager cfg) {
        MetricsMode mode = MetricsMode.parse(cfg.get("metrics_mode"));
        MetricsConfig mc = loadConfig(cfg);
        MetricsRegistry r = new MetricsRegistry(mc, mode, MetricsRegistry.localHostname(), true,
            cfg.getBool("model_metrics_auto_detect"));
        MetricsRegistry.install(r);
        if (!cfg.getBool("disable_system_metrics")) {
            int interval = Math.max(1, cfg.getInt("metric_time_interval"));
            int gpus = cfg.get("number_of_gpu") == null ? -1 : cfg.getNumberOfGpu();
            collector = new SystemMetricsCollector(r, interval, gpus);
            collector.start();
        }
        LOG.info("Metrics mode " + mode.name().toLowerCase(java.util.Locale.ROOT) + ", "
                + mc.tsMetrics().size() + " frontend and " + mc.modelMetrics().size() + " model metrics declared");
        return r;
    }

    /** Stops system metrics. */
    public static synchronized void stop() {
        if (collector != null) {
            collector.stop();
            collector = null;
        }
    }

    /** The metrics.yaml path the frontend uses (and passes to workers as --metrics-config); null if none. */
    public static File configFile(ConfigManager cfg) {
        String explicit = cfg.get("metrics_config");
        if (explicit != null && !explicit.trim().isEmpty()) {
            return new File(explicit.trim()).getAbsoluteFile();
        }
        File home = new File(new File(new File(cfg.getModelServerHome()), "ts"), "configs");
        File f = new File(home, "metrics.yaml");
        if (f.isFile()) {
            return f.getAbsoluteFile();
        }
        try {
            File jar = new File(MetricsSetup.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            File near = new File(new File(jar.getParentFile().getParentFile(), "configs"), "metrics.yaml");
            if (jar.isFile() && near.isFile()) {
                return near.getAbsoluteFile();
            }
        } catch (URISyntaxException | RuntimeException e) {
            LOG.debug("cannot locate the frontend jar: " + e.getMessage());
        }
        return null;
    }

    private static MetricsConfig loadConfig(ConfigManager cfg) {
        File f = configFile(cfg);
        if (f == null) {
            LOG.warn("No metrics.yaml found (set metrics_config, or install ts/configs/metrics.yaml); "
                    + "no metrics are recorded");
            return MetricsConfig.parse("", "(none)");
        }
        if (!f.isFile()) {
            throw new MetricsConfigException("Metrics config " + f + " given by metrics_config does not exist; "
                    + "point metrics_config at a metrics.yaml");
        }
        return MetricsConfig.load(f.toPath());
    }
}
