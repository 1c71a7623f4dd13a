package org.tserve.wlm.api;

/** What {@code /ping}, {@code /v2/health/ready} and the gRPC health calls report ({@code ModelManager.health()}). */
public enum Health {
    /** Every model's default version has its minWorkers workers READY. */
    HEALTHY("Healthy"),
    /** Every model can serve (one READY worker or more), some have fewer READY workers than minWorkers. */
    PARTIAL("Partial Healthy"),
    /** A model with minWorkers above 0 has no READY worker, or the startup models are still loading. */
    UNHEALTHY("Unhealthy");

    /** The {@code status} text of {@code /ping}. */
    public final String text;

    Health(String text) {
        this.text = text;
    }

    /** Whether requests can be served (readiness probes answer 200). */
    public boolean ready() {
        return this != UNHEALTHY;
    }
}
