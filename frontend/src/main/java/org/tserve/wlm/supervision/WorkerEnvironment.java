package org.tserve.wlm.supervision;

import java.nio.file.Path;

/** How worker processes are launched: interpreter, socket directory and the env they get. */
public final class WorkerEnvironment {
    public final String python;
    /** Per-server directory for the workers' Unix sockets ({@code <tmp>/tserve-<pid>/}). */
    public final Path socketDir;
    /** Directory containing the {@code ts} package (model_server_home). */
    public final String modelServerHome;
    /** {@code --metrics-config} for workers, or null. */
    public final String metricsConfig;
    public final boolean decodeInputRequest;
    public final boolean useTcp;
    /** Regex of server env vars not passed to workers (blacklist_env_vars), or empty. */
    public final String envBlacklist;
    public final boolean limitMaxImagePixels;
    public final String serviceEnvelope;
    /** The zygote plain workers are forked from, or null (every worker starts cold). */
    public final WarmStarter warmStart;
    /** {@code send_error_detail}: handler exception text reaches clients (else a generic message; the worker logs it). */
    public final boolean sendErrorDetail;

    public WorkerEnvironment(String python, Path socketDir, String modelServerHome, String metricsConfig,
                             boolean decodeInputRequest, boolean useTcp, String envBlacklist,
                             boolean limitMaxImagePixels, String serviceEnvelope) {
        this(python, socketDir, modelServerHome, metricsConfig, decodeInputRequest, useTcp, envBlacklist,
                limitMaxImagePixels, serviceEnvelope, null);
    }

    public WorkerEnvironment(String python, Path socketDir, String modelServerHome, String metricsConfig,
                             boolean decodeInputRequest, boolean useTcp, String envBlacklist,
                             boolean limitMaxImagePixels, String serviceEnvelope, WarmStarter warmStart) {
        this(python, socketDir, modelServerHome, metricsConfig, decodeInputRequest, useTcp, envBlacklist,
                limitMaxImagePixels, serviceEnvelope, warmStart, true);
    }

    private WorkerEnvironment(String python, Path socketDir, String modelServerHome, String metricsConfig,
                              boolean decodeInputRequest, boolean useTcp, String envBlacklist,
                              boolean limitMaxImagePixels, String serviceEnvelope, WarmStarter warmStart,
                              boolean sendErrorDetail) {
        this.sendErrorDetail = sendErrorDetail;
        this.warmStart = warmStart;
        this.python = python;
        this.socketDir = socketDir;
        this.modelServerHome = modelServerHome;
        this.metricsConfig = metricsConfig;
        this.decodeInputRequest = decodeInputRequest;
        this.useTcp = useTcp;
        this.envBlacklist = envBlacklist == null ? "" : envBlacklist;
        this.limitMaxImagePixels = limitMaxImagePixels;
        this.serviceEnvelope = serviceEnvelope == null ? "" : serviceEnvelope;
    }

    /** This environment with {@code send_error_detail} set. */
    public WorkerEnvironment withSendErrorDetail(boolean send) {
        return new WorkerEnvironment(python, socketDir, modelServerHome, metricsConfig, decodeInputRequest, useTcp,
                envBlacklist, limitMaxImagePixels, serviceEnvelope, warmStart, send);
    }
}
