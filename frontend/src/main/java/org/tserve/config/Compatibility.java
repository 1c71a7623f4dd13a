package org.tserve.config;

/**
 * The {@code compatibility} key, read once: which way each deliberate difference from TorchServe
 * 0.12 answers (docs/compatibility.md, "The compatibility switch"). Without it tserve's own
 * behaviour; with {@code compatibility=torchserve-0.12} TorchServe's status codes and messages, so
 * a fleet migrates first and improves second. The error paths ask {@link #current()}.
 */
public enum Compatibility {
    /** tserve's behaviour (the default, {@code compatibility} unset or {@code tserve}). */
    TSERVE,
    /** {@code compatibility=torchserve-0.12}: TorchServe 0.12's answers where tserve differs on purpose. */
    TORCHSERVE_0_12;

    /** The config value of {@link #TORCHSERVE_0_12}. */
    public static final String TORCHSERVE_0_12_VALUE = "torchserve-0.12";

    private static volatile Compatibility current = TSERVE;

    /** The running server's policy. */
    public static Compatibility current() {
        return current;
    }

    /** Set once by ConfigManager when the configuration is loaded (tests set it too). */
    public static void install(Compatibility policy) {
        current = policy;
    }

    /** The policy a config value names; anything else is a ConfigException naming the key. */
    public static Compatibility parse(String value) {
        String v = value == null ? "" : value.trim();
        if (v.isEmpty() || v.equalsIgnoreCase("tserve")) {
            return TSERVE;
        }
        if (v.equalsIgnoreCase(TORCHSERVE_0_12_VALUE)) {
            return TORCHSERVE_0_12;
        }
        throw new ConfigException("Invalid value '" + value + "' for configuration key 'compatibility': expected "
                + TORCHSERVE_0_12_VALUE + " or tserve");
    }

    private boolean torchServe() {
        return this == TORCHSERVE_0_12;
    }

    /** A missing or wrong token: TorchServe answers 400, tserve 401. */
    public int badKeyStatus() {
        return torchServe() ? 400 : 401;
    }

    /** TorchServe's token failure text, or tserve's (which names the key the API needs). */
    public String badKeyMessage(String tserveMessage) {
        return torchServe() ? "Token Authorization failed. Token either incorrect, expired, or not provided correctly"
                : tserveMessage;
    }

    /** A request past its responseTimeout: TorchServe answers 500 "Worker died.", tserve 504. */
    public int responseTimeoutStatus() {
        return torchServe() ? 500 : 504;
    }

    public String responseTimeoutMessage(String tserveMessage) {
        return torchServe() ? "Worker died." : tserveMessage;
    }

    /** Registering a URL whose file is already in the model store: TorchServe 500, tserve 409. */
    public int archiveExistsStatus() {
        return torchServe() ? 500 : 409;
    }

    /**
     * gRPC SetDefault without a model_version: tserve answers INVALID_ARGUMENT naming the parameter;
     * TorchServe looks the empty version up and answers NOT_FOUND (the model, or its version "").
     */
    public boolean setDefaultRequiresVersion() {
        return !torchServe();
    }

    /**
     * An archive that is neither zip nor gzip (a model_snapshot's .mar replaced by junk): TorchServe
     * reads it as an empty archive with a default manifest and lists the model, whose workers never
     * load; tserve refuses it (400 naming the file), so a snapshot drops the model.
     */
    public boolean junkArchiveReadAsEmpty() {
        return torchServe();
    }

    /**
     * A stateful (sequenceBatching) continuous-batching model: TorchServe hands a sequence's next
     * request to the worker while the previous one still streams (its example handlers cancel a
     * stream that way); tserve sends a sequence's requests one at a time.
     */
    public boolean sequenceRequestsOverlap() {
        return torchServe();
    }

    /**
     * The worker lifecycle lines scripts read from the log (wlm.supervision.WorkerLog): TorchServe's
     * wording, which repeats no worker output, or tserve's, which names the cause on each line.
     */
    public boolean torchServeLogWording() {
        return torchServe();
    }

    /**
     * GET /metrics with an {@code Accept} that asks for OpenMetrics or protobuf: tserve answers in it
     * (client_java, where a counter's samples end with {@code _total}); TorchServe 0.12 always answers its text 0.0.4.
     */
    public boolean negotiatesMetricsFormat() {
        return !torchServe();
    }

    /** TorchServe reads any boolean other than {@code true} (any case) as false; tserve refuses it. */
    public boolean lenientBooleans() {
        return torchServe();
    }
}
