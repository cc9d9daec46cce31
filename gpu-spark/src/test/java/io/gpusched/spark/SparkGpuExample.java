package io.gpusched.spark;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.resource.ResourceInformation;

/**
 * Runnable example: a local Spark driver that asks for GPUs through gpusched and prints what it got.
 * <pre>
 * SparkGpuExample [gpus] [stateDir] [inventory] [--wait]
 * </pre>
 * Defaults: 2 GPUs, {@code /tmp/gpusched-example}, {@code simulated:dgx1-v100} (a simulated DGX-1, so it runs on any
 * machine; use {@code auto} on a GPU node). With {@code --wait} it holds the GPUs until its standard input closes.
 * Prints {@code GPUS <addresses>}, or {@code REFUSED <reason>} and exits with 3 when gpusched cannot serve it.
 */
public final class SparkGpuExample {

    private SparkGpuExample() {
    }

    /** Spark's module openings for Java 17 (what spark-submit passes). */
    static final String[] JAVA_OPTIONS = {"--add-opens=java.base/java.lang=ALL-UNNAMED",
        "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED", "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
        "--add-opens=java.base/java.io=ALL-UNNAMED", "--add-opens=java.base/java.net=ALL-UNNAMED",
        "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
        "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
        "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
        "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
        "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED", "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
        "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED", "-Djdk.reflect.useDirectMethodHandle=false",
        "-Dio.netty.tryReflectionSetAccessible=true"};

    /** @return a local driver's configuration with {@code gpus} GPUs from gpusched */
    static SparkConf conf(int gpus, String stateDir, String inventory) {
        return new SparkConf().setMaster("local[1]").setAppName("gpusched-example")
                .set("spark.ui.enabled", "false")
                .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.resources.discoveryPlugin", GpuschedDiscoveryPlugin.class.getName())
                .set("spark.driver.resource.gpu.amount", String.valueOf(gpus))
                .set("spark.gpusched.stateDir", stateDir)
                .set("spark.gpusched.inventory", inventory);
    }

    /**
     * @param args [gpus] [stateDir] [inventory] [--wait]
     */
    public static void main(String[] args) throws Exception {
        int gpus = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        String dir = args.length > 1 ? args[1] : "/tmp/gpusched-example";
        String inv = args.length > 2 ? args[2] : "simulated:dgx1-v100";
        boolean wait = args.length > 3 && args[3].equals("--wait");
        SparkContext sc;
        try {
            sc = new SparkContext(conf(gpus, dir, inv));
        } catch (Throwable t) {
            StringBuilder why = new StringBuilder();
            for (Throwable c = t; c != null; c = c.getCause()) {
                why.append(c.getMessage()).append(" | ");
            }
            System.out.println("REFUSED " + why);
            System.out.flush();
            System.exit(3);
            return;
        }
        ResourceInformation gpu = sc.resources().get("gpu").get();
        System.out.println("GPUS " + String.join(",", gpu.addresses()));
        System.out.flush();
        if (wait) {
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        }
        sc.stop();
        System.exit(0);
    }
}
