/* tile_mlir.runtime._launch: cuLaunchKernel for one kernel, its arguments packed in C.
 *
 * A library call that matched an earlier one is left with packing the pointers of this
 * call and launching (see tile_mlir/ops/plan.py). cuda-python's cuLaunchKernel adds
 * 0.7-4 us of host time to the driver's own 3.3-3.9 on an H100 host (its argument
 * conversion), and ctypes parameter slots written one by one add more; a call into
 * this module packs the values into the launcher's own parameter storage and calls the
 * driver directly.
 *
 *     launcher = Launcher(function, (gx, gy, gz), (bx, by, bz), "PPqf", constants)
 *     error = launcher.launch(stream, pointer0, pointer1)
 *
 * `kinds` has one letter per kernel parameter: P a pointer (u64), q i64, i i32, h i16,
 * b i8, ? bool, d f64, f f32. `constants` has one entry per parameter: its value, fixed
 * for every launch, or None for a value passed to each `launch` (in parameter order,
 * after the stream). `launch` answers the driver's CUresult as an int (0: launched);
 * `launch_grid(stream, gx, gy, gz, *values)` launches with the grid of this call.
 *
 * The packing and the launch run under the GIL without releasing it, so one launcher
 * may be called from several threads (the storage is never shared between two calls in
 * flight). Built with the stable ABI (abi3, Python >= 3.11) by pip install; optional:
 * where it was not built, the library packs through ctypes and cuda-python.
 * libcuda is opened on the first launch, not at import (a machine without a GPU
 * imports this module and packs: `pack(*values)` answers the parameters' bytes).
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <string.h>
#include <stdint.h>

#define MAX_PARAMS 128

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, void *stream,
                         void **params, void **extra);

static launch_fn cu_launch_kernel = NULL;

typedef struct {
    PyObject_HEAD
    void *function;
    unsigned dims[6];   /* grid x, y, z; block x, y, z */
    unsigned shared;    /* dynamic shared memory bytes */
    int count;          /* parameters */
    int per_call;       /* of them passed to each launch */
    char kinds[MAX_PARAMS];
    short slot_of[MAX_PARAMS];   /* the k-th per-call value -> its parameter */
    uint64_t storage[MAX_PARAMS];  /* 8 bytes per parameter, each aligned */
    void *params[MAX_PARAMS];      /* kernelParams: the address of each parameter */
} Launcher;

static int resolve_driver(void) {
    if (cu_launch_kernel != NULL) {
        return 0;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_OSError, "tile_mlir.runtime._launch: cannot open libcuda.so.1: %s",
                     dlerror());
        return -1;
    }
    cu_launch_kernel = (launch_fn)dlsym(lib, "cuLaunchKernel");
    if (cu_launch_kernel == NULL) {
        PyErr_SetString(PyExc_OSError,
                        "tile_mlir.runtime._launch: libcuda.so.1 has no cuLaunchKernel");
        return -1;
    }
    return 0;
}

/* Write one value of the given kind into a parameter's 8 bytes; -1 with an exception
 * set when it does not fit (an OverflowError or TypeError naming what was given). */
static int store(char kind, PyObject *value, uint64_t *slot) {
    switch (kind) {
    case 'P': case 'q': case 'i': case 'h': case 'b': {
        /* modulo 2^64, then truncated to the parameter's width: as ctypes' integer
         * types store a value (the fallback launcher's) */
        unsigned long long v = PyLong_AsUnsignedLongLongMask(value);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        if (kind == 'P' || kind == 'q') *slot = (uint64_t)v;
        else if (kind == 'i') *(uint32_t *)slot = (uint32_t)v;
        else if (kind == 'h') *(uint16_t *)slot = (uint16_t)v;
        else *(uint8_t *)slot = (uint8_t)v;
        return 0;
    }
    case '?': {
        int v = PyObject_IsTrue(value);
        if (v < 0) return -1;
        *(uint8_t *)slot = (uint8_t)v;
        return 0;
    }
    case 'd': case 'f': {
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (kind == 'd') *(double *)slot = v;
        else *(float *)slot = (float)v;
        return 0;
    }
    default:
        PyErr_Format(PyExc_ValueError, "unknown parameter kind '%c'", kind);
        return -1;
    }
}

static int parse_dims(PyObject *tuple, unsigned *out, const char *what) {
    if (!PyTuple_Check(tuple) || PyTuple_Size(tuple) != 3) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of 3 ints", what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GetItem(tuple, i));
        if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (v == 0 || v > 0xFFFFFFFFul) {
            PyErr_Format(PyExc_ValueError, "%s: sizes from 1 to 2^32 - 1", what);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    return 0;
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *function, *grid, *block, *constants;
    const char *kinds;
    unsigned int shared = 0;
    static char *names[] = {"function", "grid", "block", "kinds", "constants", "shared", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOsO|I", names, &function, &grid,
                                     &block, &kinds, &constants, &shared)) {
        return NULL;
    }
    Py_ssize_t count = (Py_ssize_t)strlen(kinds);
    if (count > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "at most %d kernel parameters", MAX_PARAMS);
        return NULL;
    }
    if (!PyTuple_Check(constants) || PyTuple_Size(constants) != count) {
        PyErr_SetString(PyExc_TypeError, "constants: a tuple with one entry per parameter");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Launcher *self = (Launcher *)alloc(type, 0);
    if (self == NULL) return NULL;
    self->function = PyLong_AsVoidPtr(function);
    if (self->function == NULL && PyErr_Occurred()) goto fail;
    if (parse_dims(grid, self->dims, "grid") < 0) goto fail;
    if (parse_dims(block, self->dims + 3, "block") < 0) goto fail;
    self->shared = shared;
    self->count = (int)count;
    self->per_call = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (strchr("Pqihb?df", kinds[i]) == NULL) {
            PyErr_Format(PyExc_ValueError, "unknown parameter kind '%c'", kinds[i]);
            goto fail;
        }
        self->kinds[i] = kinds[i];
        self->storage[i] = 0;
        self->params[i] = &self->storage[i];
        PyObject *value = PyTuple_GetItem(constants, i);
        if (value == Py_None) {
            self->slot_of[self->per_call++] = (short)i;
        } else if (store(kinds[i], value, &self->storage[i]) < 0) {
            goto fail;
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void launcher_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    freefunc release = (freefunc)PyType_GetSlot(type, Py_tp_free);
    release(self);
    Py_DECREF(type);
}

/* Store the per-call values args[first:] into their parameters; -1 on a bad one. */
static int store_all(Launcher *self, PyObject *const *args, Py_ssize_t nargs,
                     Py_ssize_t first, const char *method) {
    if (nargs != self->per_call + first) {
        PyErr_Format(PyExc_TypeError, "%s takes %s%d values, got %zd", method,
                     first ? "the stream and " : "", self->per_call, nargs - first);
        return -1;
    }
    for (int k = 0; k < self->per_call; k++) {
        int i = self->slot_of[k];
        if (store(self->kinds[i], args[k + first], &self->storage[i]) < 0) return -1;
    }
    return 0;
}

static PyObject *launch_with(Launcher *self, PyObject *stream_arg, const unsigned *grid) {
    void *stream = PyLong_AsVoidPtr(stream_arg);
    if (stream == NULL && PyErr_Occurred()) return NULL;
    if (cu_launch_kernel == NULL && resolve_driver() < 0) return NULL;
    const unsigned *b = self->dims + 3;
    int err = cu_launch_kernel(self->function, grid[0], grid[1], grid[2], b[0], b[1], b[2],
                               self->shared, stream, self->params, NULL);
    return PyLong_FromLong(err);
}

static PyObject *launcher_launch(PyObject *obj, PyObject *const *args, Py_ssize_t nargs) {
    Launcher *self = (Launcher *)obj;
    if (store_all(self, args, nargs, 1, "launch") < 0) return NULL;
    return launch_with(self, args[0], self->dims);
}

/* launch_grid(stream, gx, gy, gz, *values): the grid given per call (the runtime's
 * Kernel, whose grid a call may set); the driver checks its sizes. */
static PyObject *launcher_launch_grid(PyObject *obj, PyObject *const *args,
                                      Py_ssize_t nargs) {
    Launcher *self = (Launcher *)obj;
    if (nargs < 4) {
        PyErr_SetString(PyExc_TypeError, "launch_grid takes the stream, gx, gy, gz and values");
        return NULL;
    }
    unsigned grid[3];
    for (int i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(args[1 + i]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) return NULL;
        if (v > 0xFFFFFFFFul) {
            PyErr_SetString(PyExc_OverflowError, "grid sizes are below 2^32");
            return NULL;
        }
        grid[i] = (unsigned)v;
    }
    if (store_all(self, args + 3, nargs - 3, 1, "launch_grid") < 0) return NULL;
    return launch_with(self, args[0], grid);
}

/* The parameters as the driver would read them, 8 bytes each: for tests. */
static PyObject *launcher_pack(PyObject *obj, PyObject *const *args, Py_ssize_t nargs) {
    Launcher *self = (Launcher *)obj;
    if (store_all(self, args, nargs, 0, "pack") < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)self->storage,
                                     (Py_ssize_t)self->count * (Py_ssize_t)sizeof(uint64_t));
}

static PyMethodDef launcher_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launcher_launch, METH_FASTCALL,
     "launch(stream, *values) -> CUresult as an int: pack the per-call values, launch"},
    {"launch_grid", (PyCFunction)(void (*)(void))launcher_launch_grid, METH_FASTCALL,
     "launch_grid(stream, gx, gy, gz, *values) -> CUresult as an int: launch with this grid"},
    {"pack", (PyCFunction)(void (*)(void))launcher_pack, METH_FASTCALL,
     "pack(*values) -> bytes: pack the per-call values without launching, and answer the "
     "parameters as the driver would read them (8 bytes each)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_new, (void *)launcher_new},
    {Py_tp_dealloc, (void *)launcher_dealloc},
    {Py_tp_methods, launcher_methods},
    {Py_tp_doc, "Launcher(function, grid, block, kinds, constants, shared=0): one kernel's "
                "launch with its parameters packed in C (see the module's docstring)"},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    "tile_mlir.runtime._launch.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT,
    launcher_slots,
};

static int module_exec(PyObject *module) {
    PyObject *type = PyType_FromSpec(&launcher_spec);
    if (type == NULL) return -1;
    if (PyModule_AddObjectRef(module, "Launcher", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    Py_DECREF(type);
    return PyModule_AddIntConstant(module, "MAX_PARAMS", MAX_PARAMS);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_launch",
    "cuLaunchKernel with the arguments packed in C (see tile_mlir/runtime/_launch.c)", 0,
    NULL, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__launch(void) { return PyModuleDef_Init(&module_def); }
