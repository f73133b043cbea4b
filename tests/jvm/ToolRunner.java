import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Field;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import javax.management.MBeanServer;
import javax.management.ObjectName;

/**
 * Runs Kafka's command-line tools one after another in this one JVM, for the tests (tests/jvm/tool_runner.py):
 * a tool's own JVM spends ~1.5 s starting and loading classes that this one has loaded already. The tests' own
 * Java programs that are fit for it run here too (kafka_jvm.JavaPrograms, {@code lasting}), in a runner of
 * their own classpath.
 *
 * <p>Each call arrives on standard input (main class, arguments, standard input text) and its answer (exit
 * code, what it printed on standard output and standard error) leaves on standard output, both framed by
 * {@link #readCall} and {@link #writeAnswer}. A call runs {@code main} on a new thread named "main", with
 * System.in, System.out and System.err its own. System.out and System.err are replaced once, before any tool
 * class loads, by streams that write to the current call's buffers: Scala's Console and the log4j console
 * appenders keep the stream they first see.
 *
 * <p>Kafka's tools leave through {@code Exit.exit}: its procedure here notes the first code and parks the
 * calling thread for good, so nothing after the exit runs, as in a JVM that exits. Shutdown hooks added
 * through {@code Exit.addShutdownHook} run at the end of the call, as a JVM runs them at exit. A tool that
 * returns from main ends when the threads it started that keep a JVM alive (non-daemon) have ended; one that
 * throws prints what Java's launcher prints and exits 1.
 *
 * <p>What a separate JVM would not share with the last call is put back before each call: the clients' id
 * sequences (a fresh JVM's first admin client is "adminclient-1", and the warnings name it) and the system
 * properties. A call that leaves threads running or Kafka clients registered (a client a tool did not close
 * before exiting), or exits holding a lock, answers with the retire flag: its JVM is not fit for another call,
 * and is stopped.
 */
public final class ToolRunner {
    private static final int MAGIC = 0x0D7AD3C0;
    private static final int RETIRE = 1;
    private static final int MAX_PARKED = 100;
    private static final String[] CLIENT_ID_SEQUENCES = {
        "org.apache.kafka.clients.admin.KafkaAdminClient",
        "org.apache.kafka.clients.producer.ProducerConfig",
        "org.apache.kafka.clients.consumer.ConsumerConfig",
    };
    /** Threads the JVM or the JDK start once and keep, idle, whoever asked first. */
    private static final String[] LASTING_THREADS = {"ForkJoinPool.commonPool-worker-", "Common-Cleaner", "process reaper", "Attach Listener", "metrics-meter-tick-thread-"};

    /** An output stream that writes to whatever the current call has set, or nowhere between calls. */
    private static final class Switch extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();

        @Override
        public void write(int b) throws IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target.write(b, off, len);
        }
    }

    /** One tool run: how it ended and the hooks it added. */
    private static final class Call {
        final CountDownLatch exited = new CountDownLatch(1);
        final List<Thread> hooks = Collections.synchronizedList(new ArrayList<>());
        final Set<Thread> parked = Collections.synchronizedSet(new HashSet<>());
        volatile Integer exitCode;
        volatile boolean halted;
        volatile boolean uncaught;

        synchronized void exit(int code, boolean halt) {
            if (exitCode == null) {
                exitCode = code;
                halted = halt;
            }
            parked.add(Thread.currentThread());
            exited.countDown();
        }
    }

    private static final Switch OUT = new Switch();
    private static final Switch ERR = new Switch();
    private static volatile Call current = new Call();
    private static int parkedTotal;

    private ToolRunner() {
    }

    public static void main(String[] args) throws Exception {
        DataInputStream calls = new DataInputStream(new BufferedInputStream(new FileInputStream(FileDescriptor.in)));
        DataOutputStream answers = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)));
        Charset charset = Charset.defaultCharset();
        System.setOut(new PrintStream(OUT, true, charset));
        System.setErr(new PrintStream(ERR, true, charset));
        installExit(args[0]);
        Map<AtomicInteger, Integer> sequences = new HashMap<>();
        for (String name : CLIENT_ID_SEQUENCES) {
            for (Field field : Class.forName(name).getDeclaredFields()) {
                if (Modifier.isStatic(field.getModifiers()) && field.getType() == AtomicInteger.class) {
                    field.setAccessible(true);
                    AtomicInteger sequence = (AtomicInteger) field.get(null);
                    sequences.put(sequence, sequence.get());
                }
            }
        }
        Properties properties = (Properties) System.getProperties().clone();
        answers.writeInt(MAGIC);
        answers.flush();
        while (true) {
            String mainClass;
            String[] toolArgs;
            byte[] stdin;
            try {
                mainClass = readString(calls);
                toolArgs = new String[calls.readInt()];
                for (int i = 0; i < toolArgs.length; i++) {
                    toolArgs[i] = readString(calls);
                }
                stdin = new byte[calls.readInt()];
                calls.readFully(stdin);
            } catch (EOFException e) {
                Runtime.getRuntime().halt(0);
                return;
            }
            sequences.forEach(AtomicInteger::set);
            restore(properties);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            boolean retire = run(mainClass, toolArgs, stdin, out, err);
            answers.writeInt(MAGIC);
            answers.writeInt(current.exitCode);
            answers.writeInt(retire ? RETIRE : 0);
            writeBytes(answers, out.toByteArray());
            writeBytes(answers, err.toByteArray());
            answers.flush();
        }
    }

    /** Kafka's Exit (3.9: common.utils.Exit, 4.x: common.utils.internals.Exit) sends exits, halts and shutdown hooks here. */
    private static void installExit(String exitClassName) throws Exception {
        Class<?> exit = Class.forName(exitClassName);
        Class<?> procedure = Class.forName(exitClassName + "$Procedure");
        Class<?> hookAdder = Class.forName(exitClassName + "$ShutdownHookAdder");
        exit.getMethod("setExitProcedure", procedure).invoke(null, exitProcedure(procedure, false));
        exit.getMethod("setHaltProcedure", procedure).invoke(null, exitProcedure(procedure, true));
        Object adder = Proxy.newProxyInstance(ToolRunner.class.getClassLoader(), new Class<?>[] {hookAdder}, (proxy, method, a) -> {
            if (method.getDeclaringClass() == Object.class) {
                return objectMethod(proxy, method, a);
            }
            current.hooks.add(new Thread((Runnable) a[1], (String) a[0]));
            return null;
        });
        exit.getMethod("setShutdownHookAdder", hookAdder).invoke(null, adder);
    }

    private static Object exitProcedure(Class<?> procedure, boolean halt) {
        return Proxy.newProxyInstance(ToolRunner.class.getClassLoader(), new Class<?>[] {procedure}, (proxy, method, a) -> {
            if (method.getDeclaringClass() == Object.class) {
                return objectMethod(proxy, method, a);
            }
            current.exit((Integer) a[0], halt);
            while (true) {
                LockSupport.park();
            }
        });
    }

    private static Object objectMethod(Object proxy, Method method, Object[] a) {
        switch (method.getName()) {
            case "equals":
                return proxy == a[0];
            case "hashCode":
                return System.identityHashCode(proxy);
            default:
                return "ToolRunner." + method.getName();
        }
    }

    /** One call; true when this JVM should not take another. */
    private static boolean run(String mainClass, String[] args, byte[] stdin, ByteArrayOutputStream out, ByteArrayOutputStream err) throws Exception {
        Call call = new Call();
        current = call;
        Set<Thread> before = Thread.getAllStackTraces().keySet();
        int clientsBefore = registeredClients();
        System.setIn(new ByteArrayInputStream(stdin));
        OUT.target = out;
        ERR.target = err;
        Thread main = new ToolThread(mainClass, args, call);
        main.start();
        while (!call.exited.await(5, TimeUnit.MILLISECONDS)) {
            if (!main.isAlive() && startedSince(before, call).stream().noneMatch(t -> !t.isDaemon())) {
                call.exitCode = call.uncaught ? 1 : 0;
                break;
            }
        }
        if (!call.halted) {
            List<Thread> hooks;
            synchronized (call.hooks) {
                hooks = new ArrayList<>(call.hooks);
            }
            for (Thread hook : hooks) {
                hook.start();
            }
            for (Thread hook : hooks) {
                hook.join();
            }
        }
        System.out.flush();
        System.err.flush();
        OUT.target = OutputStream.nullOutputStream();
        ERR.target = OutputStream.nullOutputStream();
        parkedTotal += call.parked.size();
        return parkedTotal > MAX_PARKED || parkedHoldingLocks(call) || leftBehind(before, call) || registeredClients() != clientsBefore;
    }

    /**
     * Whether a thread that exited holds a lock, or a class's initialisation, that a later call could wait for
     * for ever (in a JVM of its own, the exit released everything).
     */
    private static boolean parkedHoldingLocks(Call call) throws InterruptedException {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        List<Thread> parked;
        synchronized (call.parked) {
            parked = new ArrayList<>(call.parked);
        }
        for (Thread thread : parked) {
            ThreadInfo info = parkedInfo(threads, thread);
            if (info == null || info.getLockedMonitors().length > 0 || info.getLockedSynchronizers().length > 0) {
                return true;
            }
            for (StackTraceElement frame : info.getStackTrace()) {
                if (frame.getMethodName().equals("<clinit>")) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The thread once it has parked for good in the exit procedure (it notes the exit first), or null if it does not within a second. */
    private static ThreadInfo parkedInfo(ThreadMXBean threads, Thread thread) throws InterruptedException {
        for (int i = 0; i < 100; i++) {
            ThreadInfo info = threads.getThreadInfo(new long[] {thread.getId()}, true, true)[0];
            if (info != null && info.getThreadState() == Thread.State.WAITING && info.getStackTrace().length > 0 && info.getStackTrace()[0].getMethodName().equals("park")) {
                return info;
            }
            Thread.sleep(10);
        }
        return null;
    }

    /**
     * The thread a tool's main runs on, named "main" as the launcher's is. Between its run and the tool's main
     * lie only frames Java hides (a method handle's), so a stack trace printed in the call differs from a
     * separate JVM's by this thread's one frame at the bottom, which tool_runner.py takes out.
     */
    private static final class ToolThread extends Thread {
        private final String mainClass;
        private final String[] args;
        private final Call call;

        ToolThread(String mainClass, String[] args, Call call) {
            super(null, null, "main", 0);
            this.mainClass = mainClass;
            this.args = args;
            this.call = call;
        }

        @Override
        public void run() {
            try {
                MethodHandle main = MethodHandles.publicLookup().findStatic(Class.forName(mainClass), "main", MethodType.methodType(void.class, String[].class));
                main.invokeExact(args);
            } catch (Throwable e) {
                // What Java's launcher prints for an exception out of main.
                call.uncaught = true;
                System.err.print("Exception in thread \"main\" ");
                e.printStackTrace(System.err);
            }
        }
    }

    private static List<Thread> startedSince(Set<Thread> before, Call call) {
        List<Thread> started = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (!before.contains(t) && !call.parked.contains(t) && t.isAlive() && !lasting(t)) {
                started.add(t);
            }
        }
        return started;
    }

    private static boolean lasting(Thread t) {
        for (String prefix : LASTING_THREADS) {
            if (t.getName().startsWith(prefix)) {
                return true;
            }
        }
        return false;
    }

    /** Threads the call started that are still running a moment after it ended (closing clients join theirs). */
    private static boolean leftBehind(Set<Thread> before, Call call) throws InterruptedException {
        for (int i = 0; i < 20; i++) {
            if (startedSince(before, call).isEmpty()) {
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }

    /** Kafka clients registered (each registers its app-info MBean until it is closed). */
    private static int registeredClients() throws Exception {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        return server.queryNames(new ObjectName("kafka.*:type=app-info,*"), null).size();
    }

    private static void restore(Properties saved) {
        Properties now = System.getProperties();
        if (!now.equals(saved)) {
            now.keySet().retainAll(saved.keySet());
            now.putAll(saved);
        }
    }

    private static String readString(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readInt()];
        in.readFully(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeInt(bytes.length);
        out.write(bytes);
    }
}
