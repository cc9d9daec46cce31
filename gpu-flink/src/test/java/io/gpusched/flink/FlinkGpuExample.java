package io.gpusched.flink;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * Runnable example: a Flink cluster in this JVM (one TaskManager) whose TaskManager draws its GPUs from gpusched, and
 * a job whose operator reads them with {@code getRuntimeContext().getExternalResourceInfos("gpu")}.
 * <pre>
 * FlinkGpuExample [gpus] [stateDir] [inventory] [--wait]
 * </pre>
 * Defaults: 2 GPUs, {@code /tmp/gpusched-example}, {@code simulated:dgx1-v100}. Prints {@code GPUS index/uuid,...}
 * (empty after {@code GPUS } when the TaskManager got none). With {@code --wait} the TaskManager keeps its GPUs until
 * standard input closes.
 */
public final class FlinkGpuExample {

    /** What the operators saw, as {@code index/uuid}. */
    static final ConcurrentLinkedQueue<String> SEEN = new ConcurrentLinkedQueue<>();

    private FlinkGpuExample() {
    }

    /** @return the cluster configuration with {@code gpus} GPUs per TaskManager from gpusched */
    static Configuration conf(int gpus, String stateDir, String inventory) {
        Configuration c = new Configuration();
        c.setString("external-resources", "gpu");
        c.setString("external-resource.gpu.amount", String.valueOf(gpus));
        c.setString("external-resource.gpu.driver-factory.class", GpuschedDriverFactory.class.getName());
        c.setString("external-resource.gpu.param.state-dir", stateDir);
        c.setString("external-resource.gpu.param.inventory", inventory);
        c.setString("rest.bind-port", "0");
        return c;
    }

    /** The operator of the example: records the GPUs of the TaskManager it runs on. */
    static final class ReadGpus extends RichMapFunction<Integer, Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public Integer map(Integer v) {
            Set<ExternalResourceInfo> infos = getRuntimeContext().getExternalResourceInfos("gpu");
            for (ExternalResourceInfo i : infos) {
                SEEN.add(i.getProperty("index").orElse("?") + "/" + i.getProperty("uuid").orElse("?"));
            }
            return v;
        }
    }

    /** Starts a one-TaskManager cluster, runs the job, and returns what the operator saw (cluster left running). */
    static GpuMiniCluster run(Configuration conf) throws Exception {
        GpuMiniCluster mc = new GpuMiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(1)
                .setPluginManager(GpuMiniCluster.CLASSPATH_PLUGINS).build());
        mc.start();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        env.fromData(List.of(1)).map(new ReadGpus()).sinkTo(new DiscardingSink<>());
        JobID id = mc.submitJob(env.getStreamGraph()).get().getJobID();
        mc.requestJobResult(id).get().toJobExecutionResult(FlinkGpuExample.class.getClassLoader());
        return mc;
    }

    /**
     * @param args [gpus] [stateDir] [inventory] [--wait]
     */
    public static void main(String[] args) throws Exception {
        int gpus = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        String dir = args.length > 1 ? args[1] : "/tmp/gpusched-example";
        String inv = args.length > 2 ? args[2] : "simulated:dgx1-v100";
        boolean wait = args.length > 3 && args[3].equals("--wait");
        GpuMiniCluster mc;
        try {
            mc = run(conf(gpus, dir, inv));
        } catch (Throwable t) {
            t.printStackTrace();
            System.out.println("FAILED " + t);
            System.out.flush();
            System.exit(2);
            return;
        }
        System.out.println("GPUS " + String.join(",", new TreeSet<>(SEEN)));
        System.out.flush();
        if (wait) {
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        }
        mc.close();
        System.exit(0);
    }
}
