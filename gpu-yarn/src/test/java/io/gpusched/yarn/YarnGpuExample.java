package io.gpusched.yarn;

import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DeviceRuntimeSpec;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.YarnRuntimeType;

/**
 * Runnable example: the plugin as the NodeManager drives it, on a simulated DGX-1 (pass {@code auto} to read this
 * machine's GPUs): the devices it reports, the GPUs it picks for a 2-GPU container when all are free, and what a Docker
 * container gets for them.
 * <pre>
 * YarnGpuExample [inventory]
 * </pre>
 */
public final class YarnGpuExample {

    private YarnGpuExample() {
    }

    /**
     * @param args [inventory], default {@code simulated:dgx1-v100}
     */
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, tempLedger());
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        conf.set(GpuschedDevicePlugin.KEY_INVENTORY, args.length > 0 ? args[0] : "simulated:dgx1-v100");
        GpuschedDevicePlugin plugin = new GpuschedDevicePlugin();
        plugin.setConf(conf);
        System.out.println("resource " + plugin.getRegisterRequestInfo().getResourceName());
        Set<Device> all = plugin.getDevices();
        all.forEach(d -> System.out.println("device " + d));
        Set<Device> two = plugin.allocateDevices(all, 2, Map.of());
        System.out.println("2-GPU container gets " + two);
        DeviceRuntimeSpec spec = plugin.onDevicesAllocated(two, YarnRuntimeType.RUNTIME_DOCKER);
        System.out.println("docker runtime " + spec.getContainerRuntime());
        spec.getDeviceMounts().forEach(m -> System.out.println("  --device " + m.getDevicePathInHost()));
        spec.getVolumeMounts().forEach(m -> System.out.println("  -v " + m.getHostPath() + ":" + m.getMountPath()
                + ":ro"));
        spec.getEnvs().forEach((k, v) -> System.out.println("  -e " + k + "=" + v));
        plugin.close();
    }

    private static String tempLedger() {
        try {
            return java.nio.file.Files.createTempDirectory("gpusched-yarn").toString();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
