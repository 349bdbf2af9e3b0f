// tiles/tiles.h — everything a generated Hopper kernel includes.
#pragma once
#include "arch.h"
#include "smem.h"
#include "rt.h"
#include "ops.h"
#include "tma.h"
#include "schedule.h"
#include "split.h"
