package io.gpusched.spark.standalone;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.resource.ResourceInformation;

/**
 * The application {@link SparkStandaloneIT} submits (client mode, a driver JVM of its own): waits for every executor,
 * runs tasks that report, from inside the executor, its id, its pid, its parent's pid (the Worker that launched it)
 * and the GPU addresses Spark gave it, prints one {@code EXECUTOR id pid ppid addresses} line per executor, stops.
 * The configuration comes from {@code spark-defaults.conf} in {@code SPARK_CONF_DIR} and {@code -D} options.
 */
public final class StandaloneGpuApp {
    private StandaloneGpuApp() {
    }

    /** @param args unused */
    public static void main(String[] args) throws Exception {
        SparkConf conf = new SparkConf().setAppName("gpusched-standalone-it");
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            List<Integer> seeds = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                seeds.add(i);
            }
            List<String> seen = sc.parallelize(seeds, 16).map(i -> {
                TaskContext tc = TaskContext.get();
                ResourceInformation gpu = tc.resources().get("gpu").get();
                Thread.sleep(200); // hold the core a moment, so both executors take tasks
                return "EXECUTOR " + org.apache.spark.SparkEnv.get().executorId() + " "
                        + ProcessHandle.current().pid() + " "
                        + ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L) + " "
                        + String.join(",", new TreeSet<>(List.of(gpu.addresses())));
            }).distinct().collect();
            seen.forEach(System.out::println);
            System.out.flush();
        }
    }
}
