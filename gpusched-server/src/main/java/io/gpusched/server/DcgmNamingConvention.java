package io.gpusched.server;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.config.NamingConvention;
import io.micrometer.prometheusmetrics.PrometheusNamingConvention;
import java.util.Set;

/** Micrometer's Prometheus naming, except that dcgm-exporter's metric names and label keys are kept verbatim. */
final class DcgmNamingConvention implements NamingConvention {
    private static final Set<String> DCGM_KEYS = Set.of("gpu", "UUID", "device", "modelName", "Hostname");
    private final PrometheusNamingConvention prometheus = new PrometheusNamingConvention();

    @Override
    public String name(String name, Meter.Type type, String baseUnit) {
        return name.startsWith("DCGM_") ? name : prometheus.name(name, type, baseUnit);
    }

    @Override
    public String tagKey(String key) {
        return DCGM_KEYS.contains(key) ? key : prometheus.tagKey(key);
    }

    @Override
    public String tagValue(String value) {
        return prometheus.tagValue(value);
    }
}
