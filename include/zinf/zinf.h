/* zinf public API: include this one header. */
#ifndef ZINF_ZINF_H
#define ZINF_ZINF_H

#include "zinf/config.h"
#include "zinf/dtype.h"
#include "zinf/engine.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"
#include "zinf/optim.h"
#include "zinf/version.h"

#endif /* ZINF_ZINF_H */
