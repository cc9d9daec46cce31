package io.gpusched.server;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuVendor;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.micrometer.core.instrument.config.NamingConvention;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Per-GPU gauges under NVIDIA dcgm-exporter's names and labels, so dashboards built on dcgm-exporter work unchanged:
 * {@code DCGM_FI_DEV_GPU_UTIL} (%), {@code DCGM_FI_DEV_FB_USED} and {@code DCGM_FI_DEV_FB_FREE} (MiB),
 * {@code DCGM_FI_DEV_GPU_TEMP} (C), {@code DCGM_FI_DEV_POWER_USAGE} (W) and {@code DCGM_FI_DEV_XID_ERRORS} (the last
 * XID seen in the device's health reason, 0 when none), each labelled {@code gpu}, {@code UUID}, {@code device}
 * ({@code nvidia0}, or {@code card0} on AMD), {@code modelName} and {@code Hostname}. A value the backend does not
 * report is NaN, which Prometheus drops from sums.
 *
 * <p>Meter names are upper case with underscores; register them on a registry whose naming convention keeps them (the
 * console's does; {@link #namingConvention()} gives one for a Prometheus registry of your own).
 */
public final class DcgmMeterBinder implements MeterBinder {
    private static final Pattern XID = Pattern.compile("XID[ _:]*(\\d+)", Pattern.CASE_INSENSITIVE);
    private static final double MIB = 1024.0 * 1024.0;

    private final Supplier<List<DeviceState>> devices;
    private final String hostname;

    /**
     * @param devices  the node's current device states (e.g. {@code scheduler::devices}); called on each scrape
     * @param hostname the {@code Hostname} label
     */
    public DcgmMeterBinder(Supplier<List<DeviceState>> devices, String hostname) {
        this.devices = Objects.requireNonNull(devices, "devices");
        this.hostname = Objects.requireNonNull(hostname, "hostname");
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        for (DeviceState d : devices.get()) {
            int index = d.index();
            Tags tags = Tags.of("gpu", String.valueOf(index), "UUID", d.device().uuid(), "device",
                    (d.device().vendor() == GpuVendor.AMD ? "card" : "nvidia") + index,
                    "modelName", d.device().name(), "Hostname", hostname);
            gauge(registry, "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", tags, index,
                    s -> metric(s).map(m -> m.utilizationPercent().orElse(Double.NaN)).orElse(Double.NaN));
            gauge(registry, "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", tags, index,
                    s -> metric(s).flatMap(GpuMetrics::memoryUsed).map(m -> m.bytes() / MIB).orElse(Double.NaN));
            gauge(registry, "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", tags, index,
                    s -> metric(s).flatMap(GpuMetrics::memoryUsed)
                            .map(m -> Math.max(0, s.device().memory().bytes() - m.bytes()) / MIB).orElse(Double.NaN));
            gauge(registry, "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", tags, index,
                    s -> metric(s).map(m -> m.temperatureCelsius().orElse(Double.NaN)).orElse(Double.NaN));
            gauge(registry, "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", tags, index,
                    s -> metric(s).map(m -> m.powerWatts().orElse(Double.NaN)).orElse(Double.NaN));
            gauge(registry, "DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", tags, index,
                    s -> lastXid(s.health().reason().orElse("")));
        }
    }

    private static Optional<GpuMetrics> metric(DeviceState s) {
        return s.metrics();
    }

    /** @return the XID number in a health reason such as "XID 79: fallen off the bus", or 0 */
    static double lastXid(String reason) {
        Matcher m = XID.matcher(reason);
        double last = 0;
        while (m.find()) {
            last = Double.parseDouble(m.group(1));
        }
        return last;
    }

    private void gauge(MeterRegistry registry, String name, String help, Tags tags, int index,
            ToDoubleFunction<DeviceState> value) {
        Gauge.builder(name, this, self -> self.devices.get().stream().filter(s -> s.index() == index).findFirst()
                .map(value::applyAsDouble).orElse(Double.NaN))
                .strongReference(true) // the registry is all that holds this binder: a gauge's weak reference would
                // let the first GC take it, and every DCGM series would read NaN from then on
                .description(help).tags(tags).register(registry);
    }

    /**
     * @return a Prometheus naming convention that keeps {@code DCGM_*} names and the dcgm label keys as they are and
     *         names everything else as Micrometer's Prometheus convention does
     */
    public static NamingConvention namingConvention() {
        return new DcgmNamingConvention();
    }
}
