package io.gpusched.nvml;

import io.gpusched.core.GpuHealth;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Objects;

/**
 * The health state machine of an inventory's devices, in pure Java: no NVML call, time from a {@link Clock}.
 *
 * <ul>
 *   <li>A device starts with the health discovery found ({@link #start}); one <em>pinned</em> there (its identity or
 *       its MIG layout could not be read) never changes until the inventory is reopened.</li>
 *   <li>A failure ({@link #failed} for a failing live call, {@link #degrade} for anything else, e.g. an XID) makes it
 *       LOST or UNHEALTHY; LOST stays LOST (a later, milder error does not soften it), and the recovery period starts
 *       over.</li>
 *   <li>A clean live answer ({@link #answered}) counts towards recovery: the device is HEALTHY again once it has
 *       answered without error for the whole recovery period.</li>
 * </ul>
 * Every method that changes a device's health returns the new health (for the caller to announce, outside this
 * type's lock), or null when nothing changed. Thread-safe.
 */
final class DeviceHealth {
    /** How a failing call ({@code call}, NVML code {@code status}) reads as a health. */
    @FunctionalInterface
    interface Describer {
        GpuHealth describe(String call, int status);
    }

    private final Clock clock;
    private final Duration recoveryAfter;
    private final Describer describer;
    private final GpuHealth[] health;
    private final boolean[] pinned;
    private final Instant[] answeringSince;
    /** Per device, the last live failure (call, code) and the health built for it: a repeated failure reuses it. */
    private final String[] lastFailCall;
    private final int[] lastFailStatus;
    private final GpuHealth[] lastFailHealth;

    /**
     * @param devices       how many devices
     * @param clock         the time of clean answers
     * @param recoveryAfter how long a device must answer cleanly to be healthy again
     * @param describer     the health of a failing call
     */
    DeviceHealth(int devices, Clock clock, Duration recoveryAfter, Describer describer) {
        this.clock = Objects.requireNonNull(clock, "clock");
        this.recoveryAfter = Objects.requireNonNull(recoveryAfter, "recoveryAfter");
        this.describer = Objects.requireNonNull(describer, "describer");
        health = new GpuHealth[devices];
        pinned = new boolean[devices];
        answeringSince = new Instant[devices];
        lastFailCall = new String[devices];
        lastFailStatus = new int[devices];
        lastFailHealth = new GpuHealth[devices];
        Arrays.fill(health, GpuHealth.HEALTHY);
    }

    /** Sets device {@code i}'s health from discovery; a pinned device keeps it until the inventory is reopened. */
    synchronized void start(int i, GpuHealth h, boolean pin) {
        health[i] = h;
        pinned[i] = pin;
    }

    /**
     * A fault found while the inventory opens (topology, event registration): applied to a healthy, unpinned device
     * without announcing it, as discovery's own findings are.
     */
    synchronized void openFault(int i, GpuHealth h) {
        if (!pinned[i] && health[i].isHealthy()) {
            health[i] = h;
        }
    }

    /** @return device {@code i}'s health now */
    synchronized GpuHealth get(int i) {
        return health[i];
    }

    /** @return whether device {@code i} is out of service and may recover (not healthy, not pinned) */
    synchronized boolean recovering(int i) {
        return !pinned[i] && !health[i].isHealthy();
    }

    /**
     * One live read of device {@code i}: a failing call ({@code status} not 0) degrades it; otherwise, when it
     * answered at least one live call, the answer counts towards recovery.
     *
     * @return the new health when it changed, else null
     */
    GpuHealth live(int i, int status, int answers, String failedCall) {
        if (status != 0) {
            return failed(i, failedCall == null ? "NVML" : failedCall, status);
        }
        return answers > 0 ? answered(i) : null;
    }

    /** @return the new health when the failing call changed it, else null */
    GpuHealth failed(int i, String call, int status) {
        GpuHealth h;
        synchronized (this) {
            h = lastFailStatus[i] == status && call.equals(lastFailCall[i]) ? lastFailHealth[i] : null;
        }
        if (h == null) {
            h = describer.describe(call, status);
            synchronized (this) {
                lastFailCall[i] = call;
                lastFailStatus[i] = status;
                lastFailHealth[i] = h;
            }
        }
        return degrade(i, h);
    }

    /** A failure: LOST stays LOST; the recovery period starts over. @return {@code h} when it changed, else null */
    synchronized GpuHealth degrade(int i, GpuHealth h) {
        if (pinned[i]) {
            return null;
        }
        answeringSince[i] = null;
        if (health[i].equals(h) || (health[i].state() == GpuHealth.State.LOST && h.state() != GpuHealth.State.LOST)) {
            return null;
        }
        health[i] = h;
        return h;
    }

    /** A clean live answer now. @return HEALTHY when the device has recovered with it, else null */
    synchronized GpuHealth answered(int i) {
        if (pinned[i] || health[i].isHealthy()) {
            return null;
        }
        Instant now = clock.instant();
        if (answeringSince[i] == null) {
            answeringSince[i] = now;
        }
        if (Duration.between(answeringSince[i], now).compareTo(recoveryAfter) < 0) {
            return null;
        }
        answeringSince[i] = null;
        health[i] = GpuHealth.HEALTHY;
        return GpuHealth.HEALTHY;
    }
}
