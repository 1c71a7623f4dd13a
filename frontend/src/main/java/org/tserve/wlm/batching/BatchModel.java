package org.tserve.wlm.batching;

import java.util.concurrent.BlockingDeque;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.Job;

/**
 * What batching sees of the model version whose jobs it sends: its name and version (for messages
 * and metrics), its current settings, its job queue and whether INFERENCE goes to every rank.
 * The registry's model implements it; tests pass a fake.
 */
public interface BatchModel {
    String modelName();

    String modelVersion();

    /** The settings now (a scale call replaces them). */
    ModelSettings getSettings();

    /** The model's bounded queue of jobs that no worker took yet. */
    BlockingDeque<Job> jobQueue();

    /** Whether INFERENCE frames (and SEQUENCE_END) go to every rank of a torchrun worker, not rank 0 alone. */
    boolean inferenceToAllRanks();
}
