package io.gpusched.core;

/** What a job is, for strategies that place by load and temperature. */
public enum WorkloadHint {
    /** Long, heavy, exclusive: spread over the coolest, least utilized GPUs. */
    TRAINING,
    /** Light, often shared: pack onto GPUs already shared, coolest first. */
    INFERENCE
}
